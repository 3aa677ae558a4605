"""`lowkiq -r --log-format json`: one JSON object per line, with the facts of each line as fields; a
failure is one line (class and message), its traceback only at debug level; a start that fails is one
JSON line too. `--log-format text`: what a job's data holds never forges a line."""

from __future__ import annotations

import json
import re

import pytest
from cli_support import one_line_error
from server_support import records, run_cli, start_server
from timing_support import wait_until

import lowkiq

pytestmark = pytest.mark.slow


def json_lines(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]  # every line is one JSON object, or this raises
    assert all(isinstance(p, dict) for p in parsed)
    return parsed


def test_json_lines_carry_worker_shard_ids_and_the_error(app, redis_url, tmp_path):
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
    # each failure carries its traceback (for error trackers), and no other line does
    assert all("in perform" in line["exception"] for line in failures)
    assert [line for line in lines if "exception" in line] == failures
    assert any(line.get("shards") for line in lines)  # "thread N serves shards ..." names them


def test_debug_logs_the_traceback_once_per_failure_on_its_error_record(app, redis_url, tmp_path):
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
    assert all("in perform" in line["exception"] and line["level"] == "ERROR" for line in tracebacks)


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
    # A message that is many lines by design, without fields (the thread dump), keeps its lines, indented.
    dump = logging.makeLogRecord({"msg": "thread dump:\n%s", "args": ("--- thread a\n  line",), "levelname": "INFO"})
    assert formatter.format(dump).endswith("thread dump:\n  --- thread a\n    line")


NASTY_APP = '''
import logging
import lowkiq

NASTY = "esc \\x1b[2J cr \\r nul \\x00 rlo \\u202e\\n2031-01-01 00:00:00,000 INFO MainThread lowkiq.server: all is well"


class Nasty(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 1

    def retry_in(self, retry_count):
        return 0

    def perform(self, payloads_by_id):
        logging.getLogger("app").warning("performing %s", payloads_by_id["n1"][0])
        raise ValueError(payloads_by_id["n1"][0])

    def retries_exhausted(self, batch):
        logging.getLogger("app").warning("dead: %s", batch[0].error)
        raise RuntimeError("exhausted " + NASTY)


lowkiq.configure(workers=[Nasty])
'''


def test_text_log_of_a_failing_job_and_its_retries_exhausted_forges_no_line(configure, redis_url, tmp_path):
    class Nasty(lowkiq.Worker):
        shards_count = 1

        def perform(self, payloads_by_id):
            pass

    configure(workers=[Nasty])
    nasty = "esc \x1b[2J cr \r nul \x00 rlo \u202e\n2031-01-01 00:00:00,000 INFO MainThread lowkiq.server: all is well"
    Nasty.perform_async([{"id": "n1", "payload": nasty}])
    (tmp_path / "nasty_app.py").write_text(NASTY_APP)
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", "--log-level", "DEBUG",
                          "--log-format", "text", app=tmp_path / "nasty_app.py")
    try:
        wait_until(lambda: "retries_exhausted raised" in server.log() and "exhausted esc" in server.log())
        assert server.stop() == 0
    finally:
        server.kill()
    raw = server.log_path.read_bytes()
    assert not any(c in raw for c in (b"\x1b", b"\r", b"\x00", "\u202e".encode()))
    lines = raw.decode().splitlines()
    start = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
    assert all(start.match(line) or line.startswith("  ") for line in lines), lines
    assert not any(line.startswith("2031") for line in lines)
    # the user's messages, the failure lines and both tracebacks all showed the forged text, escaped
    assert sum("all is well" in line for line in lines) >= 6
    assert "  Traceback (most recent call last):" in lines
    assert "  RuntimeError: exhausted esc \\x1b[2J cr \\r nul \\x00 rlo \\u202e" in lines


def one_json_line(result) -> dict:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    [line] = json_lines(lines[0])
    assert line["level"] == "ERROR" and line["logger"] == "lowkiq.cli" and line["time"].endswith("+00:00")
    assert line["exit_code"] == result.returncode
    return line


def test_start_up_failures_are_one_json_line_with_json_chosen(tmp_path, redis_server):
    (tmp_path / "broken.py").write_text("import lowkiq\nimport no_such_module_here\n")
    (tmp_path / "good.py").write_text(
        "import lowkiq\n\nclass W(lowkiq.Worker):\n    def perform(self, batch):\n        pass\n\n"
        "lowkiq.configure(workers=[W])\n")
    (tmp_path / "init_fails.py").write_text(
        "import lowkiq\n\nclass W(lowkiq.Worker):\n    def perform(self, batch):\n        pass\n\n"
        "def init():\n    raise RuntimeError('no config\\nfor this host')\n\n"
        "lowkiq.configure(workers=[W], on_server_init=init)\n")
    url = {"LOWKIQ_REDIS_URL": redis_server.url}

    broken = one_json_line(run_cli(tmp_path, "-r", "broken.py", "--log-format", "json", env=url))
    assert broken["message"] == "broken.py raised while loading:" and broken["error_class"] == "ModuleNotFoundError"
    assert "No module named 'no_such_module_here'" in broken["exception"]

    for bad in (["--threads", "zero"], ["--no-such-option"]):  # refused by argparse, before anything runs
        refused = one_json_line(run_cli(tmp_path, "-r", "good.py", "--log-format=json", *bad, env=url))
        assert refused["error_class"] == "ArgumentError" and refused["exit_code"] == 2
    bad_env = one_json_line(run_cli(tmp_path, "-r", "good.py", env={**url, "LOWKIQ_LOG_FORMAT": "json",
                                                                    "LOWKIQ_THREADS_PER_NODE": "-3"}))
    assert bad_env["error_class"] == "ValueError" and "threads_per_node must be an int >= 1" in bad_env["exception"]

    unreachable = one_json_line(run_cli(tmp_path, "-r", "good.py", "--log-format", "json",
                                        env={"LOWKIQ_REDIS_URL": "redis://127.0.0.1:1/0"}))
    assert unreachable["message"].startswith("cannot reach Redis at ") and unreachable["exit_code"] == 2
    # redis-py 8 lets the socket's own ConnectionRefusedError through where earlier ones wrapped it
    assert unreachable["error_class"] in ("ConnectionError", "ConnectionRefusedError")

    init = one_json_line(run_cli(tmp_path, "-r", "init_fails.py", "--log-format", "json", env=url))
    assert init["message"] == "the server stopped: RuntimeError: no config\nfor this host"
    assert init["exit_code"] == 1 and "in init" in init["exception"]

    # The text format is unchanged: one line for a refused start.
    text = run_cli(tmp_path, "-r", "good.py", env={"LOWKIQ_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert one_line_error(text).startswith("lowkiq: cannot reach Redis at ")
