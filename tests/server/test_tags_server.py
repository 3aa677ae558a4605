"""`lowkiq -r` performing tagged jobs and a worker with max_retry_count = 0, against a real Redis."""

from __future__ import annotations

import importlib
import sys

import pytest
from server_support import APPS, queue_empty, records, start_server
from timing_support import wait_until

from lowkiq.console import Console

pytestmark = pytest.mark.slow

APP = APPS / "tags_app.py"


@pytest.fixture
def app(configure):
    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    module = importlib.import_module("tags_app")
    configure(workers=list(module.WORKERS.values()))
    return module


def test_a_server_performs_once_sends_the_first_failure_to_the_morgue_and_empties_the_tag_index(
        app, r, redis_url, tmp_path, configure):
    app.OneShot.perform_async([{"id": f"ok{i}", "payload": "fine", "tags": ["batch-7"]} for i in range(6)]
                              + [{"id": "doomed", "payload": "bad", "tags": ["batch-7", "vip"]}])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", app=APP)
    try:
        wait_until(lambda: queue_empty(r, app.OneShot) and records(tmp_path, "exhausted"), timeout=20)
        attempts = [job_id for rec in records(tmp_path, "perform") for job_id in rec["batch"]]
        assert sorted(attempts) == sorted([f"ok{i}" for i in range(6)] + ["doomed"])  # each performed once
        assert [rec["ids"] for rec in records(tmp_path, "exhausted")] == [["doomed"]]
    finally:
        assert server.stop() == 0
    c = Console.from_runtime(configure(workers=[app.OneShot]), redis_timeout=30)
    view = c.worker("OneShot")
    page = c.tagged(view, "batch-7", limit=100)
    assert [(job.id, job.queued, job.busy, job.dead) for job in page.jobs] == [("doomed", False, False, True)]
    assert c.tags_of(view, "doomed") == ("batch-7", "vip") and c.tags_of(view, "ok0") == ()
