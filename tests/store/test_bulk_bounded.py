"""Whole-area actions ("perform all now", "kill all failed", "requeue all", ...) never hold Redis long: at
200,000 jobs in one shard no lowkiq script shows in SLOWLOG over 100 ms. An action cut off midway (SIGINT,
kill -9 of the process running it) leaves every job either done or untouched, and the audit log says it
started (and, when the process could still write, where it was cut off)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from queue_support import held_lease

import lowkiq
from lowkiq.store import audit
from lowkiq.store.actions import CHUNK

pytestmark = pytest.mark.slow

PER_SHARD = 200_000
SLOW_US = 100_000


def enqueued_count(queries, order_by: str = "perform_in", **bounds) -> int:
    """Queued jobs within the bounds, as the console counts them (a listing's matching count)."""
    count = queries.enqueued(order_by, limit=1, with_count=True, **bounds).matching
    assert count is not None
    return count


class Big(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 25

    def perform(self, payloads_by_id: Any) -> None:
        pass


def enqueue(n: int, perform_in: float | None = None) -> None:
    for start in range(0, n, 20_000):
        Big.perform_async([{"id": f"j{i:07}", **({"perform_in": perform_in} if perform_in else {})}
                           for i in range(start, min(n, start + 20_000))])


def fail_all(rt) -> None:
    """Every due job of the shard fails once (retried in an hour), through the servers' own scripts."""
    q = rt.queue(Big)
    lease = held_lease(q, 0)
    while True:
        taken = q.ack_and_take(None, (lease, 10_000)).jobs
        if not taken:
            return
        q.fail(lease, [(job.id, rt.clock() + 3600) for job in taken], b"RuntimeError: boom", Big.max_retry_count)


def slow_scripts(r) -> list[tuple[int, str]]:
    return [(e["duration"], str(e["command"])[:60]) for e in r.slowlog_get(128)
            if str(e["command"]).upper().startswith(("EVALSHA", "EVAL ", "FCALL", "B'EVALSHA"))]


@pytest.fixture
def big(configure, r):
    rt = configure(workers=[Big])
    rt.clock = time.time  # real time: the jobs' times are compared with Redis's clock
    r.config_set("slowlog-log-slower-than", SLOW_US)
    yield rt
    r.config_set("slowlog-log-slower-than", 10_000)


def measured(r, action) -> int:
    r.slowlog_reset()
    touched = action()
    assert slow_scripts(r) == [], "a lowkiq script held Redis over 100 ms"
    return touched


def test_whole_area_actions_at_200k_jobs_never_hold_redis_over_100_ms(big, r):
    actions = big.actions(Big)
    q = big.queries(Big)
    enqueue(PER_SHARD, perform_in=time.time() + 3600)
    assert measured(r, actions.perform_all_now) == PER_SHARD
    fail_all(big)
    assert enqueued_count(q, "retry_count", min=0) == PER_SHARD
    assert measured(r, actions.kill_failed) == PER_SHARD
    assert measured(r, actions.morgue_requeue_all) == PER_SHARD
    fail_all(big)
    assert measured(r, actions.delete_failed) == PER_SHARD
    enqueue(PER_SHARD)
    assert measured(r, actions.delete_all) == PER_SHARD
    enqueue(PER_SHARD)
    fail_all(big)
    actions.kill_failed()
    assert measured(r, actions.morgue_delete_all) == PER_SHARD
    assert q.morgue_count() == 0 and enqueued_count(q) == 0


RUNNER = """
import sys, lowkiq
from lowkiq.console import Console

class Big(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass

runtime = lowkiq.configure(workers=[Big], redis_url=sys.argv[1])
console = Console.from_runtime(runtime, redis_timeout=30)
[view] = console.workers()
print("go", flush=True)
print(console.act_on_all(view, "morgue_requeue_all", who="ops", source="cli", action="morgue/requeue_all"), flush=True)
"""


def run_requeue_all(tmp_path, redis_url: str) -> subprocess.Popen[str]:
    script = tmp_path / "requeue_all.py"
    script.write_text(RUNNER)
    # SIGINT at its default in the runner, whatever this process inherited (a background job's is ignored)
    return subprocess.Popen([sys.executable, str(script), redis_url], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def dead_then_cut(big, r, tmp_path, redis_url, signum: int) -> tuple[int, int]:
    """100,000 dead jobs; "requeue all" in another process, cut by ``signum`` once some were requeued."""
    enqueue(100_000)
    fail_all(big)
    big.actions(Big).kill_failed()
    q = big.queries(Big)
    assert q.morgue_count() == 100_000
    runner = run_requeue_all(tmp_path, redis_url)
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "go"
        deadline = time.monotonic() + 30
        while q.morgue_count() > 90_000 and time.monotonic() < deadline:
            time.sleep(0.002)
        runner.send_signal(signum)
        runner.wait(timeout=20)
    finally:
        runner.kill()
    dead, queued = q.morgue_count(), enqueued_count(q)
    assert 0 < dead < 100_000, "the action was not cut off midway"
    # Each job is in exactly one place, with its payload: done or untouched, nothing lost, nothing twice.
    assert dead + queued == 100_000
    dead_ids = {i for chunk in q.morgue_ids("id") for i in chunk}
    queued_ids = {i for chunk in q.enqueued_ids("id") for i in chunk}
    assert not dead_ids & queued_ids and len(dead_ids | queued_ids) == 100_000
    return dead, queued


def test_a_requeue_all_killed_midway_leaves_each_job_done_or_untouched_and_its_start_audited(big, r, tmp_path,
                                                                                          redis_url):
    dead, queued = dead_then_cut(big, r, tmp_path, redis_url, signal.SIGKILL)
    [started] = audit.read(big.client)
    assert (started.action, started.scope, started.source) == ("morgue/requeue_all", "all: started", "cli")
    # Running it again finishes the work, and says so.
    assert big.actions(Big).morgue_requeue_all() == dead
    assert enqueued_count(big.queries(Big)) == 100_000


def test_a_requeue_all_interrupted_records_where_it_was_cut_off(big, r, tmp_path, redis_url):
    dead, queued = dead_then_cut(big, r, tmp_path, redis_url, signal.SIGINT)
    ended, started = audit.read(big.client)
    assert started.scope == "all: started"
    # The count the process knew: the chunk in flight when the signal came may have run without its reply.
    assert ended.scope == f"all: cut off after {ended.count:,} jobs (KeyboardInterrupt)"
    assert queued - CHUNK <= ended.count <= queued
