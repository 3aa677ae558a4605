"""A paused server and its child processes (isolation = "process"), with real `lowkiq -r` processes, a real
redis-server and an execution log:

- a server stopped (SIGSTOP) while its child hangs (blocked in C code, or holding the GIL in C code): the
  child ends itself at time_limit + time_limit_grace, and the server, once resumed, fails the batch with
  TimeLimitExceeded as if it had killed the child;
- a server stopped between its take of a batch and the hand-off to a fresh child, for longer than its
  lease: once resumed it never hands that batch over (another server took the shard over and performed it);
- a child handed a batch whose lease's deadline has passed does not perform it, and the batch goes back to
  the queue (fenced: only while the lease is still its server's).
"""

from __future__ import annotations

import importlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from queue_support import held_lease
from server_support import APPS, FAST_LEASES, records, start_server
from test_keep_flowing import APP, flow_worker, performed, starts
from timing_support import wait_until

import lowkiq
from lowkiq.server import process_isolation as isolation
from lowkiq.server.shard_handler import ShardHandler
from lowkiq.store.lua import Wire

pytestmark = pytest.mark.slow
LIMIT, GRACE = 1.0, 0.5


def state(pid: int) -> str | None:
    """The process's state letter in /proc (R, S, T stopped, Z zombie...), None once it is reaped."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def running(pid: int) -> bool:
    """A zombie runs nothing any more: it only waits for its (stopped) parent to reap it."""
    return state(pid) not in (None, "Z", "X")


@pytest.mark.parametrize("payload", [{"sleep": 3600}, {"hold_gil": True}], ids=["blocked_in_c", "holding_the_gil"])
def test_a_child_ends_itself_at_limit_plus_grace_while_its_server_is_stopped(tmp_path, redis_url, runtime_of,
                                                                              payload):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "hang", "payload": payload}])
    # A long lease: the resumed server still holds the shard and writes the failure.
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_ISOLATION": "process", "APP_TIME_LIMIT": str(LIMIT), "APP_GRACE": str(GRACE),
                               "APP_RETRY_IN": "60", "LOWKIQ_LEASE_TTL": "30"})
    try:
        first = wait_until(lambda: starts(tmp_path, "hang"), timeout=15)[0]
        child = first["pid"]
        assert child != server.pid and first["parent"] == server.pid
        server.signal(signal.SIGSTOP)
        stopped_at = time.time()
        assert stopped_at < first["start"] + LIMIT  # stopped well before the server would kill the child
        try:
            wait_until(lambda: not running(child), timeout=first["start"] + 5 - time.time(), interval=0.01)
            ended = time.time()
            assert state(server.pid) == "T"  # the server never ran meanwhile: the child ended itself
        finally:
            server.signal(signal.SIGCONT)
        assert ended - first["start"] <= LIMIT + GRACE + 1.0, ended - first["start"]
        # Resumed, the server sees the child's end as a kill at the limit: TimeLimitExceeded, not a crash.
        q = rt.queries(worker)
        job = wait_until(lambda: (j := q.job("hang")) is not None and j.error is not None and j, timeout=10)
        assert job.error.startswith("TimeLimitExceeded"), job.error
        assert job.retry_count == 0  # its first failure: retried, not counted as a crash
        assert "ended itself" in server.log()
        assert state(child) is None  # reaped
        assert "hang" not in performed(tmp_path)
    finally:
        server.signal(signal.SIGCONT)
        assert server.stop() == 0, server.log()


def test_a_batch_is_not_handed_to_a_fresh_child_after_its_lease_expired(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    runtime_of(worker)
    worker.perform_async([{"id": "x", "payload": {"v": 1}}])
    # The first child to load the app stops its server: between its take of x and x's hand-off.
    env = {"APP_ISOLATION": "process", "APP_STOP_PARENT_ONCE": "stopped", **FAST_LEASES}
    first = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env, name="first")
    second = None
    try:
        wait_until(lambda: (tmp_path / "records" / "stopped").exists() and state(first.pid) == "T", timeout=15)
        stopped_at = time.monotonic()
        second = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env, name="second")
        # The first server's lease expires; the second takes the shard over, restores x and performs it.
        wait_until(lambda: "x" in performed(tmp_path), timeout=20)
        # The lease was last renewed at most a heartbeat (plus the poll that saw the stop) before stopped_at:
        # a takeover that did not wait for its expiry would perform x well within that margin.
        margin = float(FAST_LEASES["LOWKIQ_HEARTBEAT_INTERVAL"]) + 0.2
        assert time.monotonic() - stopped_at > float(FAST_LEASES["LOWKIQ_LEASE_TTL"]) - margin
        first.signal(signal.SIGCONT)
        wait_until(lambda: "lost the lease" in first.log(), timeout=10)
        time.sleep(1.0)  # a hand-off after the resume happens at once: its perform would be recorded by now
        assert [rec["parent"] for rec in starts(tmp_path, "x")] == [second.pid], first.log()
        assert "not performed" not in first.log()  # found lost before the hand-off: its child never got x
        assert len(performed(tmp_path)["x"]) == 1
        assert first.process.poll() is None
    finally:
        first.signal(signal.SIGCONT)
        first.kill()
        if second is not None:
            second.kill()


@pytest.fixture
def process_flow(configure: Any, redis_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The flow app's worker with process isolation, configured in this process against the test Redis; its
    children (started by this thread) load the app with the same environment."""
    (tmp_path / "records").mkdir()
    monkeypatch.setenv("APP_RECORD_DIR", str(tmp_path / "records"))
    monkeypatch.setenv("APP_ISOLATION", "process")
    monkeypatch.setenv("LOWKIQ_REDIS_URL", redis_url)
    monkeypatch.syspath_prepend(str(APPS))
    sys.modules.pop("flow_app", None)
    module = importlib.import_module("flow_app")
    runtime = configure(workers=[module.Flow])
    try:
        yield module.Flow, runtime
    finally:
        isolation.close_thread_children()
        sys.modules.pop("flow_app", None)
        lowkiq.runtime._current = None


def test_a_child_refuses_a_batch_whose_lease_deadline_passed_and_the_batch_goes_back(process_flow, tmp_path):
    flow, runtime = process_flow
    flow.perform_async([{"id": "late", "payload": {"v": 1}}])
    queue = runtime.queue(flow)
    lease = held_lease(queue, 0)
    h = ShardHandler(lease, flow(), queue, runtime.settings, Wire(runtime.client), clock=lambda: 1000.0)
    taken = h.take(None)
    assert [job.id for job in taken.jobs] == ["late"]
    # The local deadline passed (as after a pause) while Redis still holds the lease for this process.
    lease.renewed_at = time.monotonic() - lease.ttl
    assert h.perform(taken) is None
    assert not records(tmp_path, "start")  # never performed
    assert runtime.queries(flow).busy() == []  # not left in processing: back in the queue, untouched
    job = runtime.queries(flow).job("late")
    assert job is not None and job.retry_count == taken.jobs[0].retry_count and job.error is None
    # The lease renewed, the next batch is performed by the same child.
    lease.renewed_at = time.monotonic()
    taken = h.take(None)
    assert [job.id for job in taken.jobs] == ["late"]
    ack = h.perform(taken)
    assert ack is not None and ack.ids == ["late"]
    assert [rec["batch"] for rec in records(tmp_path, "start")] == [{"late": [{"v": 1}]}]
