"""The lease fault scenario with process-isolated servers in the mix, with real `lowkiq -r` processes and a
real redis-server: hot ids of rising versions (a seeded random producer) run through two servers that
perform in child processes and one that performs in threads; one process-isolated server is killed with
SIGKILL mid-load (its children die with it), another is stopped and replaced (its children finish their
batches and exit). The execution log must show nothing lost, no version run twice beyond the killed
server's in-flight batches, no id performed in two places at once, versions in order.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from execution_checks import Producer, check
from fault_support import drain, holdings, in_processing, member_of, server, settled, stop_all
from server_support import records
from timing_support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]
PROCESS = {"APP_ISOLATION": "process", "APP_PERFORM_SECONDS": "0.03"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kill_9_and_a_restart_with_process_isolated_servers_lose_nothing_and_overlap_nothing(versions, r, redis_url,
                                                                                               tmp_path):
    shards = versions.shards_count
    victim = server(tmp_path, redis_url, "victim", **PROCESS)
    threads = server(tmp_path, redis_url, "threads", APP_PERFORM_SECONDS="0.03")
    leaving = server(tmp_path, redis_url, "leaving", **PROCESS)
    everyone = [victim, threads, leaving]
    try:
        wait_until(lambda: settled(r, {p.pid for p in everyone}, shards), timeout=15)
        producer = Producer(versions, every=0.005).start()
        wait_until(lambda: any(rec.get("parent") == victim.pid for rec in records(tmp_path, "perform")), timeout=10)
        time.sleep(1.5)

        owner = member_of(r, victim.pid)
        victim.process.send_signal(signal.SIGKILL)
        victim.wait()
        in_flight = in_processing(r, versions, owner)
        victim_children = {rec["pid"] for rec in records(tmp_path, "perform") if rec.get("parent") == victim.pid}
        assert victim_children
        wait_until(lambda: not any(alive(pid) for pid in victim_children), timeout=3)  # died with their server

        new = server(tmp_path, redis_url, "new", **PROCESS)
        everyone.append(new)
        wait_until(lambda: holdings(r).get(new.pid), timeout=15)
        time.sleep(0.5)
        assert leaving.stop() == 0, leaving.log()
        wait_until(lambda: settled(r, {threads.pid, new.pid}, shards), timeout=15)
        time.sleep(1)
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)

        report = check(tmp_path, enqueued)
        assert (report.lost, report.overlaps, report.order) == (set(), set(), set()), report
        assert report.duplicates <= in_flight, (report, in_flight)
        performs = records(tmp_path, "perform")
        in_children = [rec for rec in performs if rec.get("parent") in (victim.pid, leaving.pid, new.pid)]
        in_threads = [rec for rec in performs if rec["pid"] == threads.pid]
        assert len(in_children) > 20 and len(in_threads) > 20, (len(in_children), len(in_threads))
        assert not any(rec["pid"] in (victim.pid, leaving.pid, new.pid) for rec in performs)  # never in the server
        # The server stopped on purpose let its children finish and exit: none is left.
        leaving_children = {rec["pid"] for rec in performs if rec.get("parent") == leaving.pid}
        assert leaving_children and not any(alive(pid) for pid in leaving_children)
    finally:
        stop_all(everyone)
