"""Cron rules in words for the schedules page: the common shapes read as sentences, any other none at all."""

from __future__ import annotations

import pytest

from lowkiq.console.cron_words import in_words


@pytest.mark.parametrize(("cron", "words"), [
    ("0 3 * * *", "every day at 03:00 Europe/Berlin"),
    ("*/5 * * * *", "every 5 minutes"),
    ("* * * * *", "every minute"),
    ("15 * * * *", "every hour at :15"),
    ("0 * * * *", "every hour"),
    ("0 9 * * 1-5", "every weekday (Monday to Friday) at 09:00 Europe/Berlin"),
    ("0 3 * * sun", "every Sunday at 03:00 Europe/Berlin"),
    ("0 3 * * 7", "every Sunday at 03:00 Europe/Berlin"),
    ("5 4 * * 0,6", "every Saturday and Sunday at 04:05 Europe/Berlin"),
    ("30 8 1 * *", "on day 1 of every month at 08:30 Europe/Berlin"),
    ("0 0 25 12 *", "every year on December 25 at 00:00 Europe/Berlin"),
    ("*/10 * * * 1", "every 10 minutes, every Monday (Europe/Berlin)"),
])
def test_common_rules_read_as_sentences(cron, words):
    assert in_words(cron, "Europe/Berlin") == words


@pytest.mark.parametrize("cron", ["0 3-5 * * *", "0 3 * 1 *", "0 3 1 * 1", "0 3 * * 1,3", "*/7 3 * * *", "@daily",
                                  "0 3 * * * *", "61 3 * * *"])
def test_other_rules_are_left_raw(cron):
    assert in_words(cron, "UTC") is None
