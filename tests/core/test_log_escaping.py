"""The text log format never lets user data forge a line or drive a terminal: control characters and
bidi overrides escaped, every further line of a record indented; the JSON format escapes them too."""

from __future__ import annotations

import io
import json
import logging
import re
import sys

import pytest

from lowkiq.log_format import JsonFormatter, TextFormatter, continued, fields

FORGED = "\n2031-01-01 00:00:00,000 INFO MainThread lowkiq.server: all is well"
NASTY = "esc \x1b[2J cr \r nul \x00 rlo \u202e del \x7f csi \x9b sep \u2028" + FORGED
RAW = ("\x1b", "\r", "\x00", "\u202e", "\x7f", "\x9b", "\u2028")
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")


def assert_safe_record(text: str) -> list[str]:
    """Nothing raw, and only the first line starts a record: the rest are indented."""
    assert not any(c in text for c in RAW), repr(text)
    first, *rest = text.split("\n")
    assert RECORD_START.match(first), first
    assert all(line.startswith("  ") for line in rest), rest
    return [first, *rest]


@pytest.fixture
def text_log():
    """The root logger writing the text format into a buffer, as ``lowkiq -r --log-format text`` does."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("escaping-test")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, out
    logger.removeHandler(handler)


def test_a_traceback_keeps_its_lines_but_the_exception_s_message_forges_none(text_log):
    logger, out = text_log
    try:
        raise ValueError(NASTY)
    except ValueError:
        logger.exception("Orders.retries_exhausted raised for ids %s", ["o1"])
    lines = assert_safe_record(out.getvalue().rstrip("\n"))
    assert lines[0].endswith("escaping-test: Orders.retries_exhausted raised for ids ['o1']")
    assert lines[1] == "  Traceback (most recent call last):"
    assert any(line.startswith("    File ") for line in lines)  # the traceback's own indentation, kept
    assert "  ValueError: esc \\x1b[2J cr \\r nul \\x00 rlo \\u202e del \\x7f csi \\x9b sep \\u2028" in lines
    assert lines[-1] == "  2031-01-01 00:00:00,000 INFO MainThread lowkiq.server: all is well"


def test_a_message_with_a_payload_is_indented_after_its_first_line(text_log):
    logger, out = text_log
    logger.warning("performing %s", {"o1": [NASTY]})  # an app's own log line holding a payload
    lines = assert_safe_record(out.getvalue().rstrip("\n"))
    assert len(lines) == 1  # repr of a dict escapes newlines itself; the rest is escaped here
    logger.warning("payload: %s", NASTY)
    second = out.getvalue().rstrip("\n").split("\n")[1:]
    assert_safe_record("\n".join(second))
    assert second[-1].startswith("  2031-01-01")


def test_a_line_about_a_batch_stays_one_line_and_names_and_threads_are_escaped():
    record = logging.makeLogRecord({"msg": "%s shard %d: ids %s failed: %s", "args": ("Orders", 3, ["a"], NASTY),
                                    "levelname": "ERROR", "name": "lowkiq.server", "threadName": "t\x1b]0;x\x07",
                                    **fields(error=NASTY)})
    [line] = assert_safe_record(TextFormatter().format(record))
    assert "t\\x1b]0;x\\x07 lowkiq.server" in line and line.endswith("\\n2031-01-01 00:00:00,000 INFO MainThread "
                                                                        "lowkiq.server: all is well")


def test_a_text_record_does_not_leave_escaped_text_for_other_handlers():
    try:
        raise KeyError("\x1b")
    except KeyError:
        record = logging.makeLogRecord({"msg": "x", "levelname": "ERROR", "name": "n", "exc_info": sys.exc_info()})
    assert "\\x1b" in TextFormatter().format(record)
    assert record.exc_text is None
    assert "'\\x1b'" in logging.Formatter().format(record)  # KeyError's own repr, from the raw traceback


def test_continued_leaves_plain_text_alone():
    assert continued("plain text, é and 漢字") == "plain text, é and 漢字"
    assert continued("a\nb") == "a\n  b"


def test_json_lines_escape_what_a_terminal_would_obey():
    record = logging.makeLogRecord({"msg": "failed: %s", "args": (NASTY,), "levelname": "ERROR", "name": "n"})
    line = JsonFormatter().format(record)
    assert "\n" not in line and not any(c in line for c in RAW)
    assert json.loads(line)["message"] == "failed: " + NASTY  # the same value, escaped
    assert "é" in JsonFormatter().format(logging.makeLogRecord({"msg": "é"}))  # printable text stays as it is
