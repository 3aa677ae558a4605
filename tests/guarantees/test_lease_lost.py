"""``lowkiq.context().lease_lost`` is True as soon as the lease is gone, not only once a renewal of the
keeper or an acknowledgement was refused: a real server process is stopped (SIGSTOP) in the middle of
a perform, past its lease, while another server takes its shard over; the first thing the perform does
when it resumes is read ``lease_lost``."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from server_support import APPS, ServerProcess, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store import membership

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]

APP = APPS / "lease_lost_app.py"
# A short lease so that the takeover fits the test; the same relations as the defaults.
FAST = {"LOWKIQ_LEASE_TTL": "2", "LOWKIQ_HEARTBEAT_INTERVAL": "0.3", "LOWKIQ_SETTLE": "0.3",
        "LOWKIQ_SHUTDOWN_TIMEOUT": "5", "LOWKIQ_POLL_INTERVAL": "0.1"}


@pytest.fixture
def watched(configure):
    import importlib
    import sys

    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    module = importlib.import_module("lease_lost_app")
    configure(workers=[module.Watched])
    lowkiq.current().clock = time.time
    return module.Watched


def server(tmp: Path, url: str, name: str, **env: str) -> ServerProcess:
    return start_server(tmp, url, "--threads", "2", app=APP, env={**FAST, **env}, name=name)


def holdings(r) -> dict[int, set[int]]:
    return {m.pid: set(m.shards.get("Watched", ())) for m in membership.live(r)}


def test_a_perform_resumed_after_its_lease_was_taken_over_sees_lease_lost(watched, r, redis_url, tmp_path):
    started = time.monotonic()
    paused = server(tmp_path, redis_url, "paused", APP_WAIT="1")
    other = server(tmp_path, redis_url, "other")
    try:
        wait_until(lambda: (held := holdings(r)).keys() == {paused.pid, other.pid} and all(held.values())
                   and sorted(s for part in held.values() for s in part) == [0, 1, 2, 3], timeout=15)
        q = lowkiq.current().queue(watched)
        job_id = next(f"w{i}" for i in range(1000) if q.shard_of(f"w{i}") in holdings(r)[paused.pid])
        watched.perform_async([{"id": job_id, "payload": {"wait": True}}])
        wait_until(lambda: any(rec["pid"] == paused.pid for rec in records(tmp_path, "start")), timeout=10)
        paused.signal(signal.SIGSTOP)
        try:
            # Past its 2 s lease: the other server takes the shard over and runs the batch again.
            wait_until(lambda: any(rec["pid"] == other.pid and job_id in rec["batch"]
                                   for rec in records(tmp_path, "perform")), timeout=12)
        finally:
            paused.signal(signal.SIGCONT)
        [resumed] = wait_until(lambda: [rec for rec in records(tmp_path, "perform") if rec["pid"] == paused.pid],
                               timeout=10)
        # It was stopped in that perform, past its lease: a lease renewed at most a heartbeat before the stop.
        lease_left = float(FAST["LOWKIQ_LEASE_TTL"]) - float(FAST["LOWKIQ_HEARTBEAT_INTERVAL"])
        assert resumed["stopped_for"] > lease_left, resumed
        assert resumed["lease_lost"] is True, resumed
        assert resumed["remaining"] < 0, resumed
        [new_owner] = [rec for rec in records(tmp_path, "perform") if rec["pid"] == other.pid]
        assert new_owner["lease_lost"] is False and new_owner["token"] > resumed["token"], (new_owner, resumed)
        # The process found out during the perform, and dropped the shard without trying to acknowledge.
        wait_until(lambda: "during a perform" in paused.log() or "lost the lease" in paused.log(), timeout=5)
        assert time.monotonic() - started < 30
    finally:
        paused.signal(signal.SIGCONT)
        for p in (paused, other):
            p.kill()
