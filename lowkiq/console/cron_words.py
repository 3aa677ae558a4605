"""Cron rules in words for the schedules page, beside the raw rule: "every day at 03:00 Europe/Berlin".

Only the shapes people write most are put in words (fixed minutes and hours, steps, a day of the week or of
the month, weekdays); any other rule answers None and the page shows the raw rule alone, never a wrong
sentence.

Example::

    in_words("0 3 * * *", "Europe/Berlin")    # 'every day at 03:00 Europe/Berlin'
    in_words("*/5 * * * *", "UTC")            # 'every 5 minutes'
    in_words("0 9 * * 1-5", "UTC")            # 'every weekday (Monday to Friday) at 09:00 UTC'
"""

from __future__ import annotations

import re

DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
NAMED_DAYS = {name[:3].lower(): str(i) for i, name in enumerate(DAYS)}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_NUMBER = re.compile(r"\d{1,2}")
_STEP = re.compile(r"\*/(\d{1,2})")


def in_words(cron: str, timezone: str) -> str | None:
    """The rule in words, or None when its shape is not one put in words."""
    fields = cron.split()
    if len(fields) != 5:
        return None
    minute, hour, day, month, weekday = fields
    weekday = NAMED_DAYS.get(weekday.lower(), weekday)
    when = _time_of_day(minute, hour, timezone)
    if when is None:
        return None
    days = _days(day, month, weekday)
    if days is None:
        return None
    if when.startswith("every") and days == "every day":
        return when
    if when.startswith("every"):
        return f"{when}, {days} ({timezone})"
    return f"{days} at {when}"


def _time_of_day(minute: str, hour: str, timezone: str) -> str | None:
    """"03:00 Europe/Berlin", or a repetition ("every 5 minutes", "every hour at :15"); None otherwise."""
    if _NUMBER.fullmatch(minute) and _NUMBER.fullmatch(hour) and int(minute) < 60 and int(hour) < 24:
        return f"{int(hour):02}:{int(minute):02} {timezone}"
    if hour != "*":
        return None
    if minute == "*":
        return "every minute"
    step = _STEP.fullmatch(minute)
    if step and 0 < int(step.group(1)) < 60:
        n = int(step.group(1))
        return "every minute" if n == 1 else f"every {n} minutes"
    if _NUMBER.fullmatch(minute) and int(minute) < 60:
        return "every hour" if int(minute) == 0 else f"every hour at :{int(minute):02}"
    return None


def _days(day: str, month: str, weekday: str) -> str | None:
    if month != "*":
        if not (_NUMBER.fullmatch(month) and 1 <= int(month) <= 12 and _NUMBER.fullmatch(day)
                and 1 <= int(day) <= 31 and weekday == "*"):
            return None
        return f"every year on {MONTHS[int(month) - 1]} {int(day)}"
    if day == "*" and weekday == "*":
        return "every day"
    if day == "*":
        if weekday == "1-5":
            return "every weekday (Monday to Friday)"
        if weekday in ("0,6", "6,0"):
            return "every Saturday and Sunday"
        if _NUMBER.fullmatch(weekday) and int(weekday) <= 7:
            return f"every {DAYS[int(weekday) % 7]}"
        return None
    if weekday == "*" and _NUMBER.fullmatch(day) and 1 <= int(day) <= 31:
        return f"on day {int(day)} of every month"
    return None
