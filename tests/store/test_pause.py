"""Pausing a queue with real `lowkiq -r` processes: servers stop taking it within a heartbeat, keep
serving the other queues, honour the pause across a restart, and after a resume run everything that
was enqueued meanwhile: nothing lost, nothing run twice, no overlap, versions in order."""

from __future__ import annotations

import time

import pytest
from execution_checks import Producer, check
from fault_support import drain, holdings
from server_support import APPS, records, run_cli, start_server
from timing_support import wait_until

from lowkiq.store import pausing

pytestmark = pytest.mark.slow

APP = APPS / "versions_app.py"
# The default heartbeat (1 s) is what "within a second" is measured against.
ENV = {"LOWKIQ_POLL_INTERVAL": "0.1", "LOWKIQ_SETTLE": "0.3", "APP_PERFORM_SECONDS": "0.02"}
# A pause is seen at the next beat (at most heartbeat_interval), then the batch in flight finishes.
SEEN_WITHIN = 1.0 + 0.5


def starts_after(tmp, moment: float) -> list[dict]:
    return [rec for rec in records(tmp, "start") if rec["start"] > moment]


def test_a_paused_queue_is_left_alone_across_a_restart_then_drains_in_order(versions, r, redis_url, tmp_path):
    first = start_server(tmp_path, redis_url, "--threads", "2", app=APP, env=ENV, name="first")
    servers = [first]
    try:
        wait_until(lambda: holdings(r).get(first.pid), timeout=15)
        producer = Producer(versions, every=0.005).start()
        wait_until(lambda: len(records(tmp_path, "start")) > 20, timeout=15)

        paused = run_cli(tmp_path, "pause", "Versions", "--redis-url", redis_url)
        assert paused.returncode == 0, paused.stderr
        paused_at = time.time()
        time.sleep(SEEN_WITHIN)
        late = starts_after(tmp_path, paused_at + SEEN_WITHIN - 0.5)
        assert late == [], f"{len(late)} batches began {SEEN_WITHIN - 0.5:.1f} s or more after the pause"
        wait_until(lambda: not holdings(r).get(first.pid), timeout=5)  # its shards were handed back
        assert "queue Versions is paused" in first.log()

        # Enqueueing goes on while paused, and a restart keeps the pause.
        assert first.stop() == 0
        second = start_server(tmp_path, redis_url, "--threads", "2", app=APP, env=ENV, name="second")
        servers.append(second)
        wait_until(lambda: "queue Versions is paused" in second.log(), timeout=15)
        time.sleep(1.5)
        assert starts_after(tmp_path, paused_at + SEEN_WITHIN - 0.5) == []
        waiting = sum(r.zcard(s.ids_by_perform_in_zset) for s in versions.keys().shards())
        assert waiting > 0 and pausing.paused(r).keys() == {"Versions"}

        resumed = run_cli(tmp_path, "resume", "Versions", "--redis-url", redis_url)
        assert resumed.returncode == 0, resumed.stderr
        resumed_at = time.time()
        wait_until(lambda: starts_after(tmp_path, resumed_at), timeout=5)
        time.sleep(0.5)
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
        assert "queue Versions is resumed" in second.log()
    finally:
        for process in servers:
            process.kill()
