"""A confirmed "matching" action is audited as a whole-area one is: an entry once its token is taken, before the
first chunk, and one when it ends, or when it is cut off with how many jobs it had touched. Killed outright
(kill -9 of the console serving it), the start entry stays: the log says it began and never that it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from typing import Any

import pytest
from server_support import lowkiq_bin
from web_command_support import start

import lowkiq
from lowkiq.console import MATCHING_CHUNK
from lowkiq.store import audit

pytestmark = pytest.mark.slow

JOBS = 60_000


class Bulk(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id: Any) -> None:
        pass


@pytest.fixture
def bulk(configure):
    rt = configure(workers=[Bulk])
    rt.clock = time.time  # real time: the jobs' times are compared with Redis's clock
    for first in range(0, JOBS, 20_000):
        Bulk.perform_async([{"id": f"j{i:06}", "perform_in": time.time() + 3600}
                            for i in range(first, first + 20_000)])
    return rt


def post_json(url: str, body: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read())  # type: ignore[no-any-return]


def every_job_in_one_place(rt) -> tuple[int, int]:
    """(queued, dead): each job done or untouched, none lost, none in both places."""
    q = rt.queries(Bulk)
    queued = {i for chunk in q.enqueued_ids("id") for i in chunk}
    dead = {i for chunk in q.morgue_ids("id") for i in chunk}
    assert not queued & dead and len(queued | dead) == JOBS
    return len(queued), len(dead)


def test_a_confirmed_kill_matching_killed_midway_leaves_its_start_in_the_audit_log(bulk, tmp_path, redis_url):
    process, base = start(cwd=tmp_path, env={**os.environ, "LOWKIQ_REDIS_URL": redis_url})
    url = base + "api/v1/workers/Bulk/enqueued/matching"
    body = {"action": "kill", "order_by": "id", "min": "j000000"}
    failed: list[BaseException] = []
    try:
        asked = post_json(url, {**body, "dry_run": True})
        assert asked["count"] == JOBS
        assert audit.read(bulk.client) == []  # a count touches nothing and records nothing

        def confirm() -> None:
            try:
                post_json(url, {**body, "confirm": asked["confirm"]})
            except OSError as exc:  # the console is killed under it
                failed.append(exc)

        confirming = threading.Thread(target=confirm)
        confirming.start()
        q = bulk.queries(Bulk)
        deadline = time.monotonic() + 30
        while q.morgue_count() < 5_000 and time.monotonic() < deadline:
            time.sleep(0.002)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # gunicorn's master and the worker serving the confirm
        process.wait(timeout=20)
    confirming.join(timeout=20)
    assert failed, "the confirm finished before the console was killed"
    queued, dead = every_job_in_one_place(bulk)
    assert 0 < dead < JOBS, "the action was not cut off midway"
    [started] = audit.read(bulk.client)
    assert (started.action, started.source, started.worker, started.count, started.scope) == (
        "enqueued/kill_matching", "api", "Bulk", 0, "id from j000000 to the last: started")


def test_a_confirmed_requeue_interrupted_records_where_it_was_cut_off(bulk, tmp_path, redis_url):
    """The CLI's "requeue --all" acts on a counted token too; SIGINT midway writes the cut-off entry."""
    actions = bulk.actions(Bulk)
    ids = [f"j{i:06}" for i in range(JOBS)]
    for first in range(0, JOBS, 1_000):
        actions.kill(ids[first:first + 1_000])
    q = bulk.queries(Bulk)
    assert q.morgue_count() == JOBS
    # SIGINT at its default in the CLI, whatever this process inherited (a background job's is ignored)
    cli = subprocess.Popen([lowkiq_bin(), "morgue", "requeue", "Bulk", "--all", "--yes", "--redis-url", redis_url],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 30
        while q.morgue_count() > JOBS - 5_000 and time.monotonic() < deadline:
            time.sleep(0.002)
        cli.send_signal(signal.SIGINT)
        cli.wait(timeout=20)
    finally:
        cli.kill()
        cli.communicate()
    queued, dead = every_job_in_one_place(bulk)
    assert 0 < queued < JOBS, "the action was not cut off midway"
    ended, started = audit.read(bulk.client)
    assert (started.action, started.source, started.count, started.scope) == ("morgue/requeue", "cli", 0,
                                                                                 "all: started")
    assert ended.scope == f"all: cut off after {ended.count:,} jobs (KeyboardInterrupt)"
    # The count the process knew: the chunk in flight when the signal came may have run without its reply.
    assert queued - MATCHING_CHUNK <= ended.count <= queued
