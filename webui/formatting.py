"""How numbers, times and payloads read on the pages. Pure functions of their inputs.

Templates receive this module as ``fmt``; nothing here marks text safe: Jinja
escapes every string these functions return.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..console import listing

# Payloads longer than this (or on several lines) are collapsed in <details>.
SHORT_PAYLOAD = 80
# A job page shows this many payloads at each end and folds those between, when there are many more.
PAYLOADS_AT_EACH_END = 10
# Listings show at most this much of a payload or an error; the job page shows all of it.
LISTED_TEXT = 2048
# Characters an HTML form does not post back as they were (NUL becomes U+FFFD, CR LF becomes LF).
FORM_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
FORM_ID_PREFIX = "~b64:"


def number(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def duration(seconds: float | None) -> str:
    """A span for people: 0.8 s, 42 s, 5 min, 3 h 20 min, 4 d 2 h."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = abs(seconds)
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s // 60:.0f} min"
    if s < 86400:
        return f"{s // 3600:.0f} h {s % 3600 // 60:.0f} min"
    return f"{s // 86400:.0f} d {s % 86400 // 3600:.0f} h"


def relative(at: float | None, now: float) -> str:
    """'3 min ago' or 'in 5 min'."""
    if at is None:
        return "-"
    delta = now - at
    if abs(delta) < 1:
        return "just now"
    return f"{duration(delta)} ago" if delta > 0 else f"in {duration(delta)}"


def seconds_since(at: float | None, now: float) -> float | None:
    """``now - at`` rounded to a millisecond (negative in the future); None when either is unknown."""
    if at is None or not math.isfinite(at) or not math.isfinite(now):
        return None
    return round(now - at, 3)


def absolute(at: float | None) -> str:
    """The server's local time, with its offset so that nobody guesses the zone."""
    if at is None or not math.isfinite(at):
        return "-"
    try:
        moment = datetime.fromtimestamp(at).astimezone()
    except (OverflowError, OSError, ValueError):
        return repr(at)
    return moment.strftime("%Y-%m-%d %H:%M:%S %z")


def iso(at: float | None) -> str:
    if at is None or not math.isfinite(at):
        return ""
    try:
        return datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return ""


def raw(value: float | None) -> str:
    """A unix time or score exactly as stored."""
    return "-" if value is None else repr(value)


def payload_text(payload: Any) -> str:
    """A payload as indented JSON when JSON can show it, else its repr (custom serializers)."""
    if isinstance(payload, str):
        return payload
    try:
        return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        return repr(payload)


def payload_line(payload: Any) -> str:
    """One line, compact, for summaries."""
    if isinstance(payload, str):
        text = json.dumps(payload, ensure_ascii=False)
    else:
        try:
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            text = repr(payload)
    return clip(text, SHORT_PAYLOAD)


def is_long(payload: Any) -> bool:
    """Whether a payload is collapsed: when its one-line form does not fit."""
    line = payload_line(payload)
    return line.endswith("…") or "\n" in line


def first_line(text: str | None, limit: int = 120) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return clip(line, limit)


def clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def bytes_human(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


@dataclass(frozen=True)
class Excerpt:
    text: str
    left_out: int  # characters not shown


def excerpt(text: str, limit: int = LISTED_TEXT) -> Excerpt:
    """At most ``limit`` characters of ``text``, and how many were left out."""
    if len(text) <= limit:
        return Excerpt(text, 0)
    return Excerpt(text[:limit], len(text) - limit)


def form_id(job_id: str) -> str:
    """A job id as a form field's value that posts back exactly: as it is when a form keeps it,
    else ``~b64:`` and its UTF-8 in URL-safe base64 (so are ids that start with ``~b64:``)."""
    if FORM_UNSAFE.search(job_id) or job_id.startswith(FORM_ID_PREFIX):
        return FORM_ID_PREFIX + base64.urlsafe_b64encode(job_id.encode("utf-8", "surrogatepass")).decode()
    return job_id


def form_id_decode(value: str) -> str:
    """The id ``form_id`` made ``value`` from; ValueError if it cannot have made it."""
    if not value.startswith(FORM_ID_PREFIX):
        return value
    try:
        return base64.b64decode(value[len(FORM_ID_PREFIX):].encode("ascii"), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeError) as exc:
        raise ValueError(f"malformed job id {value[:100]!r}: {exc}") from None


def filter_text(args: listing.Listing, limit: int | None = None) -> str:
    """The filter for people; each value cut to ``limit`` characters when given."""
    parts = []
    if args.min or args.max:
        low, high = (_bound_text(args.order_by, value, limit) for value in (args.min, args.max))
        parts.append(f"{args.order_by} from {low or 'the first'} to {high or 'the last'}")
    for name, label in (("error_class", "error class"), ("error", "error containing"),
                        ("payload", "payload containing")):
        value = getattr(args, name)
        if value:
            parts.append(f"{label} {clip(value, limit) if limit else value!r}")
    if args.content and args.match_case:
        parts.append("matching case")
    if args.tag:
        parts.append(f"tagged {clip(args.tag, limit) if limit else args.tag!r}")
    return ", ".join(parts) or "all"


def _bound_text(order_by: str, value: str, limit: int | None) -> str:
    """A filter bound for people: a time as a date (its unix time beside it, exactly), else as given."""
    if value and order_by in listing.TIME_ORDERS:
        return f"{absolute(float(value))} ({value})"
    return clip(value, limit) if limit else value
