"""Two nodes, several threads, bursts of versions per id: one id is never performed twice at once,
and each id's versions reach perform in score order across batches."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from server_support import import_app, queue_empty, records, start_server
from timing_support import wait_until

from lowkiq.store import membership

pytestmark = pytest.mark.slow

IDS = 150
PRODUCE_SECONDS = 3.0


def test_no_overlap_per_id_and_scores_non_decreasing(configure, r, redis_url, tmp_path):
    app = import_app()
    configure(workers=[app.Recorder])
    env = {"APP_WORKERS": "Recorder", "APP_BATCH_SIZE": "3", "APP_MAX_SLEEP": "0.003", "APP_FAIL_RATE": "0.05"}
    nodes = [start_server(tmp_path, redis_url, "--nodes", "2", "--node-number", str(n), "--threads", "2",
                          "--poll-interval", "0.05", env=env, name=f"node{n}") for n in range(2)]
    try:
        # Both serving before the versions come: a node still starting when the others have drained it all
        # would perform nothing (the test is about two nodes at work, not about start-up under load).
        wait_until(lambda: {m.pid for m in membership.live(r)} == {n.pid for n in nodes}, timeout=30)
        rng = random.Random(7)
        version = {str(i): 0 for i in range(IDS)}
        deadline = time.monotonic() + PRODUCE_SECONDS
        while time.monotonic() < deadline:
            burst = []
            for job_id in rng.sample(sorted(version), 20):
                for _ in range(rng.randint(1, 5)):  # a burst of versions of one id
                    version[job_id] += 1
                    burst.append({"id": job_id, "payload": version[job_id], "score": version[job_id]})
            app.Recorder.perform_async(burst)
            time.sleep(0.01)

        def last_versions_done() -> bool:
            seen: dict[str, int] = {}
            for rec in records(tmp_path, "perform"):
                if rec["ok"]:
                    for job_id, payloads in rec["batch"].items():
                        seen[job_id] = max(seen.get(job_id, 0), max(payloads))
            return all(seen.get(i, 0) == v for i, v in version.items() if v)

        wait_until(last_versions_done, timeout=30)
        wait_until(lambda: queue_empty(r, app.Recorder))
    finally:
        for n in nodes:
            n.stop()

    performs = records(tmp_path, "perform")
    assert {rec["pid"] for rec in performs} == {n.pid for n in nodes}
    assert sum(not rec["ok"] for rec in performs) > 0  # failures and retries were part of the run
    by_id: dict[str, list[dict]] = {}
    for rec in performs:
        for job_id, payloads in rec["batch"].items():
            by_id.setdefault(job_id, []).append({"start": rec["start"], "end": rec["end"], "ok": rec["ok"],
                                                 "payloads": payloads})
    total = 0
    for job_id, calls in by_id.items():
        calls.sort(key=lambda c: c["start"])
        for before, after in itertools.pairwise(calls):
            assert after["start"] >= before["end"], f"id {job_id}: two performs overlapped"
        handed = [p for c in calls if c["ok"] for p in c["payloads"]]
        assert handed == sorted(handed), f"id {job_id}: scores went backwards: {handed}"
        assert set(handed) == set(range(1, version[job_id] + 1)), f"id {job_id}: a version was lost"
        total += len(handed)
    assert total == sum(version.values())  # nothing re-run after success: no kill in this test
