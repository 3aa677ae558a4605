"""`lowkiq jobs list` and `lowkiq morgue` with content filters (--error-class, --error, --payload): a bounded
search that says how far it got and how to go on, and bulk actions bound to their dry run's count."""

from __future__ import annotations

import json
import re

import pytest
from cli_support import one_line_error
from server_support import run_cli
from webui_support import OrdersWorker, make_dead

pytestmark = pytest.mark.slow


@pytest.fixture
def dead(configure):
    runtime = configure(workers=[OrdersWorker])
    make_dead(runtime, OrdersWorker, [{"id": f"t{i}", "payload": {"to": "a@example.com"}} for i in range(4)],
              error=b"TimeoutError: mailbox busy")
    make_dead(runtime, OrdersWorker, [{"id": f"k{i}", "payload": {"to": "b@example.org"}} for i in range(3)],
              error=b"KeyError: 'to'")
    return runtime


def cli(tmp_path, redis_url, *args):
    return run_cli(tmp_path, *args, "--redis-url", redis_url)


def test_jobs_list_filters_dead_jobs_by_content_and_pages_with_scan(tmp_path, redis_url, dead):
    out = cli(tmp_path, redis_url, "jobs", "list", "OrdersWorker", "--dead", "--error-class", "KeyError", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert sorted(j["id"] for j in data["jobs"]) == ["k0", "k1", "k2"]
    assert data["scan"] == {"examined": 7, "total": 7, "continue": None}
    text = cli(tmp_path, redis_url, "jobs", "list", "OrdersWorker", "--dead", "--payload", "example.com",
               "--limit", "2")
    assert text.returncode == 0, text.stderr
    assert "2 dead jobs, payload containing 'example.com'" in text.stdout and "--scan" in text.stdout
    token = re.search(r"--scan (\S+)", text.stdout).group(1).strip("'")
    rest = json.loads(cli(tmp_path, redis_url, "jobs", "list", "OrdersWorker", "--dead", "--payload", "example.com",
                          "--limit", "2", "--scan", token, "--json").stdout)
    first = re.findall(r"^\s*(t\d)\b", text.stdout, re.MULTILINE)
    assert sorted(first + [j["id"] for j in rest["jobs"]]) == ["t0", "t1", "t2", "t3"]


def test_bad_content_filters_exit_2_and_say_why(tmp_path, redis_url, dead):
    for args, problem in ((["--error", ""], "--error must not be empty"),
                          (["--payload", "x" * 201], "--payload must be at most 200 characters"),
                          (["--scan", "0:0:m"], "--scan goes on with a content search"),
                          (["--error", "a", "--scan", "bogus"], "--scan: malformed continuation")):
        out = cli(tmp_path, redis_url, "jobs", "list", "OrdersWorker", "--dead", *args)
        assert problem in one_line_error(out), (args, out.stderr)


def test_morgue_requeue_by_error_text_dry_run_then_confirm(tmp_path, redis_url, dead):
    dry = cli(tmp_path, redis_url, "morgue", "requeue", "OrdersWorker", "--error", "mailbox", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    data = json.loads(dry.stdout)
    assert data["would_touch"] == 4 and data["content"] == {"error": "mailbox", "match_case": False}
    make_dead(dead, OrdersWorker, [{"id": "late"}], error=b"TimeoutError: mailbox busy")  # after the count
    done = cli(tmp_path, redis_url, "morgue", "requeue", "OrdersWorker", "--error", "mailbox",
               "--confirm", data["confirm"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["touched"] == 4
    left = {j.id for j in dead.queries(OrdersWorker).morgue("id").rows}
    assert left == {"k0", "k1", "k2", "late"}
    text = cli(tmp_path, redis_url, "morgue", "delete", "OrdersWorker", "--error-class", "KeyError", "--dry-run")
    assert "error class 'KeyError'" in text.stdout and "--error-class KeyError --redis-url" in text.stdout
    none = cli(tmp_path, redis_url, "morgue", "delete", "OrdersWorker")
    assert none.returncode == 2 and "say which dead jobs" in none.stderr


def test_content_filters_ignore_case_unless_match_case(tmp_path, redis_url, dead):
    found = lambda *extra: sorted(j["id"] for j in json.loads(cli(  # noqa: E731
        tmp_path, redis_url, "jobs", "list", "OrdersWorker", "--dead", *extra, "--json").stdout)["jobs"])
    assert found("--error", "MAILBOX") == ["t0", "t1", "t2", "t3"]
    assert found("--error-class", "keyerror") == ["k0", "k1", "k2"]
    assert found("--error", "MAILBOX", "--match-case") == []
    dry = cli(tmp_path, redis_url, "morgue", "requeue", "OrdersWorker", "--error", "Mailbox", "--match-case",
              "--dry-run")
    assert "matching case" in dry.stdout and "--error Mailbox --match-case" in dry.stdout
