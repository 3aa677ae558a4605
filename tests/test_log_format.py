"""`lowkiq -r --log-format json`: one JSON object per line, with the facts of each line as fields; a
failure is one line (class and message), its traceback only at debug level."""

from __future__ import annotations

import json

import pytest
from conftest import wait_until
from server_support import records, run_cli, start_server
from test_cli import one_line_error
from test_server_e2e import app  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def json_lines(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]  # every line is one JSON object, or this raises
    assert all(isinstance(p, dict) for p in parsed)
    return parsed


def test_json_lines_carry_worker_shard_ids_and_the_error(app, redis_url, tmp_path):  # noqa: F811
    app.Flaky.perform_async([{"id": "f1", "payload": "p"}])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", "--log-format", "json",
                          env={"APP_WORKERS": "Flaky"})
    try:
        wait_until(lambda: records(tmp_path, "exhausted"))
        wait_until(lambda: "moved to the morgue" in server.log())
        assert server.stop() == 0
    finally:
        server.kill()
    lines = json_lines(server.log())
    failures = [line for line in lines if line.get("error_class") == "ValueError"]
    assert len(failures) == 1 + app.Flaky.max_retry_count  # one line per failed try
    first = failures[0]
    assert (first["level"], first["logger"], first["worker"], first["ids"], first["batch"]) == (
        "ERROR", "lowkiq.server", "Flaky", ["f1"], 1)
    assert first["error"] == "ValueError: boom f1" and first["shard"] in (0, 1)
    assert first["message"].startswith("Flaky shard ") and first["time"].endswith("+00:00")
    [dead] = [line for line in lines if line.get("morgued")]
    assert dead["ids"] == ["f1"] and dead["level"] == "WARNING"
    assert not any("exception" in line for line in lines)  # no traceback at INFO
    assert any(line.get("shards") for line in lines)  # "thread N serves shards ..." names them


def test_debug_logs_the_traceback_once_per_failure(app, redis_url, tmp_path):  # noqa: F811
    app.Flaky.perform_async([{"id": "f2", "payload": "p"}])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", "--log-format", "json",
                          "--log-level", "DEBUG", env={"APP_WORKERS": "Flaky"})
    try:
        wait_until(lambda: records(tmp_path, "exhausted"))
        assert server.stop() == 0
    finally:
        server.kill()
    lines = json_lines(server.log())
    tracebacks = [line for line in lines if "exception" in line]
    assert len(tracebacks) == 1 + app.Flaky.max_retry_count
    assert all("in perform" in line["exception"] and line["level"] == "DEBUG" for line in tracebacks)


def test_the_text_format_is_the_default_and_a_bad_format_is_one_line(tmp_path, redis_url):
    refused = run_cli(tmp_path, "-r", "app.py", env={"LOWKIQ_LOG_FORMAT": "xml", "LOWKIQ_REDIS_URL": redis_url})
    assert "LOWKIQ_LOG_FORMAT must be one of text, json, got 'xml'" in one_line_error(refused)
    assert "--log-format {text,json}" in run_cli(tmp_path, "--help").stdout


def test_a_text_line_about_a_batch_stays_one_line_whatever_its_error_holds():
    import logging

    from lowkiq.log_format import TextFormatter, fields

    formatter = TextFormatter()
    forged = "KeyError: \x1b[31mred\x1b[0m\r\n2026-11-25 03:00:00 INFO lowkiq.server: all is well"
    failure = logging.makeLogRecord({"msg": "%s shard %d: ids %s failed: %s", "args": ("Orders", 3, ["a"], forged),
                                     "levelname": "ERROR", "name": "lowkiq.server", **fields(error=forged)})
    line = formatter.format(failure)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.endswith("failed: KeyError: \\x1b[31mred\\x1b[0m\\r\\n2026-11-25 03:00:00 INFO lowkiq.server: all is well")
    # A message that is many lines by design, without fields (the thread dump), keeps its lines.
    dump = logging.makeLogRecord({"msg": "thread dump:\n%s", "args": ("--- thread a\n  line",), "levelname": "INFO"})
    assert formatter.format(dump).endswith("thread dump:\n--- thread a\n  line")
