"""Take-ahead under kill -9 (docs/take-ahead.md), with real `lowkiq -r` processes and a real redis-server.

A crash of a server is charged to every id its shards held in processing: with ids taken ahead, to all of
them. So while a shard holds crash counts its ids are taken one at a time: only the id that kills its
server every time reaches the morgue through the crash cap; the ids taken ahead with it run again.
"""

from __future__ import annotations

import signal
import time

import pytest
from execution_checks import check
from fault_support import drain, server, stop_all
from server_support import records
from timing_support import wait_until

import lowkiq
from lowkiq.store.id_history import TAKEN_AHEAD, IdHistories

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]

ENV = {"APP_SHARDS": "1", "APP_BATCH_SIZE": "1", "APP_PERFORM_SECONDS": "0", "LOWKIQ_CRASH_LIMIT": "3"}


def test_a_job_that_kills_its_server_taken_ahead_with_15_innocent_ids_alone_reaches_the_morgue(
        versions, r, redis_url, tmp_path):
    one_shard = type("Versions", (lowkiq.Worker,), {"shards_count": 1, "queue_name": "Versions",
                                                     "perform": lambda self, batch: None})
    processes = [server(tmp_path, redis_url, "s0", **ENV)]
    everyone = list(processes)
    try:
        # Warm-up ids tell the thread its pace: quick performs, so it takes its cap of 16 ahead from then on.
        warm = {(f"warm{i}", 1) for i in range(30)}
        one_shard.perform_async([{"id": job_id, "payload": {"v": v}, "score": 1} for job_id, v in warm])
        drain(r, one_shard, warm, tmp_path, timeout=30)
        # One push (one step): the next take finds all 16 due and takes them together, the bomb in the middle.
        # Due in this order: after each restart the new process's first take (one id: no pace yet) is ok00's, and
        # its next would take the bomb ahead with the others, but for their crash counts.
        innocent = {(f"ok{i:02d}", 1) for i in range(15)}
        ordered = [{"id": job_id, "payload": {"v": v}} for job_id, v in sorted(innocent)]
        ordered.insert(7, {"id": "bomb", "payload": {"v": 1, "crash": True}})
        jobs = [{**job, "perform_in": time.time() - 100 + n} for n, job in enumerate(ordered)]
        one_shard.perform_async(jobs)
        queries = lowkiq.current().queries(one_shard)
        deadline = time.monotonic() + 60
        while queries.morgue_job("bomb") is None:
            assert time.monotonic() < deadline, "the job never reached the morgue"
            if processes[0].process.poll() is not None:  # a supervisor restarts what died
                processes[0] = server(tmp_path, redis_url, f"restart{len(everyone)}", **ENV)
                everyone.append(processes[0])
            time.sleep(0.2)
        assert "died while performing this job 3 times" in queries.morgue_job("bomb").error
        assert sum(1 for p in everyone if p.process.poll() == -signal.SIGKILL) == 3
        # The first crash took the bomb's run along: it was taken ahead with the innocent ids (all 15 unless
        # the machine was too busy to run a blank perform in 3 ms, which shortens the run).
        taken = [e for e in IdHistories(r, one_shard.keys()).of("bomb").events if e.kind == "taken"]
        first = min(taken, key=lambda e: e.at)
        assert first.reason == TAKEN_AHEAD and first.batch_size >= 8, first
        assert set(first.batch) <= {job_id for job_id, _ in innocent}
        # No innocent id reached the morgue through the crash cap; each ran (again) after the crash.
        assert [job_id for job_id, _ in sorted(innocent) if queries.morgue_job(job_id) is not None] == []
        drain(r, one_shard, innocent | warm, tmp_path, timeout=30)
        report = check(tmp_path, innocent | warm)
        assert (report.lost, report.overlaps, report.order) == (set(), set(), set()), report
        crash_at = min(rec["start"] for rec in records(tmp_path, "start") if "bomb" in rec["batch"])
        ran_after = {job_id for rec in records(tmp_path, "perform") if rec["start"] > crash_at for job_id in rec["batch"]}
        assert {job_id for job_id, _ in innocent} <= ran_after
        wait_until(lambda: queries.busy() == [], timeout=10)
    finally:
        stop_all(everyone)
