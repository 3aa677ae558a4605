"""Shard handovers inside one server process while its performs run long, with real `lowkiq -r` processes.

A process hands a shard from one of its threads to another between batches. When the membership changes
twice while a thread is busy (a rolling deploy: one server leaves, the next joins a second later), a shard
given to the busy thread is moved again before that thread ever saw it: it must still end up on exactly one
thread, or two threads run the same ids at once under the same lease, where Redis cannot tell them apart.
"""

from __future__ import annotations

import time

import pytest
from execution_checks import Producer, check
from fault_support import drain, holdings, server, settled, stop_all
from server_support import records
from timing_support import wait_until

import lowkiq
from lowkiq.server.assignment import MemberView, ShardId, assign, split_among_threads

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]

SHARDS = 12
THREADS = 2
HANG = 9.0  # long enough for a leave and a join to pass while both threads of "a" perform


def desired(name: str, names: list[str], draining: tuple[str, ...] = ()) -> set[ShardId]:
    views = [MemberView(n, THREADS, (("Versions", SHARDS),), n in draining, None, n) for n in names]
    return {shard for shard, owner in assign(views).items() if owner == name}


def moving_plan(joiner: str) -> tuple[dict[ShardId, int], set[ShardId]]:
    """What process "a" does, as its keeper computes it, through: a alone; a, b; b draining; a, ``joiner``.

    Returns a's thread of each shard while it shares with b, and the shards it acquires from b (given to a
    busy thread) that the join then moves to its other thread.
    """
    alone = split_among_threads(desired("a", ["a"]), {}, THREADS)
    with_b = split_among_threads(desired("a", ["a", "b"]), alone, THREADS)
    b_leaving = split_among_threads(desired("a", ["a", "b"], ("b",)), with_b, THREADS)
    with_joiner = split_among_threads(desired("a", ["a", joiner]), b_leaving, THREADS)
    acquired = set(b_leaving) - set(with_b)
    return with_b, {s for s in acquired & set(with_joiner) if with_joiner[s] != b_leaving[s]}


def served(log: str) -> dict[int, list[str]]:
    """Thread number -> the shards it serves, as its last "thread N serves shards ..." line says."""
    out: dict[int, list[str]] = {}
    for line in log.splitlines():
        head, found, shards = line.partition(" serves shards ")
        if found:
            out[int(head.rsplit(" ", 1)[1])] = [] if shards == "(none)" else shards.split()
    return out


def test_a_join_right_after_a_leave_during_long_performs_gives_no_shard_to_two_threads(versions, r, redis_url, tmp_path):
    # Member names make the assignment deterministic: pick a joiner whose arrival moves such a shard.
    joiner, (threads_with_b, moved) = next((name, plan) for name in (f"c{i}" for i in range(200))
                                           if (plan := moving_plan(name))[1])
    # Shards pinned to threads (Lowkiq's splitter): what moves between a process's threads here.
    a = server(tmp_path, redis_url, "a", APP_HANG="1", APP_PERFORM_SECONDS="0.2", LOWKIQ_MEMBER_NAME="a",
               LOWKIQ_SPLITTER="default")
    processes = [a]
    producer = Producer(versions, ids=60, every=0.005)
    try:
        wait_until(lambda: len(holdings(r).get(a.pid, ())) == SHARDS, timeout=15)
        b = server(tmp_path, redis_url, "b", LOWKIQ_MEMBER_NAME="b", LOWKIQ_SPLITTER="default")
        processes.append(b)
        wait_until(lambda: settled(r, {a.pid, b.pid}, SHARDS)
                   and holdings(r)[a.pid] == {index for _, index in threads_with_b}, timeout=15)

        # Both threads of "a" start a long perform.
        queue = lowkiq.current().queue(versions)
        hung = [next(f"hang{thread}.{i}" for i in range(1000)
                     if threads_with_b.get(("Versions", queue.shard_of(f"hang{thread}.{i}"))) == thread)
                for thread in range(THREADS)]
        versions.perform_async([{"id": job_id, "payload": {"v": 1, "hang": HANG}, "score": 1} for job_id in hung])
        hung_at = time.monotonic()
        wait_until(lambda: {rec["thread"] for rec in records(tmp_path, "start") if set(rec["batch"]) & set(hung)}
                   == {"lowkiq-0", "lowkiq-1"}, timeout=5)
        producer.start()

        # "b" leaves: "a" acquires its shards, for threads that are busy; then the joiner arrives.
        assert b.stop() == 0
        wait_until(lambda: len(holdings(r).get(a.pid, ())) == SHARDS, timeout=5)
        c = server(tmp_path, redis_url, "c", LOWKIQ_MEMBER_NAME=joiner, LOWKIQ_SPLITTER="default")
        processes.append(c)
        wait_until(lambda: a.log().count("this process should hold") == 4, timeout=8)
        # The premise: "a" moved those shards between its threads while both were still performing.
        assert time.monotonic() - hung_at < HANG - 0.5
        assert not any(set(rec["batch"]) & set(hung) for rec in records(tmp_path, "perform"))

        wait_until(lambda: sum(1 for rec in records(tmp_path, "perform") if set(rec["batch"]) & set(hung)) == 2,
                   timeout=HANG + 5)
        time.sleep(3)  # the load runs on: a shard served by two threads shows as overlapping performs
        enqueued = producer.stop() | {(job_id, 1) for job_id in hung}
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), (
            f"{report}; shards moved while their thread was busy: {sorted(moved)}")
        wait_until(lambda: settled(r, {a.pid, c.pid}, SHARDS), timeout=10)
        # Each shard of "a" on exactly one of its threads, once; and no lease of "a" was lost or released twice.
        shards_of_a = [shard for part in served(a.log()).values() for shard in part]
        assert sorted(shards_of_a) == sorted(f"Versions{i}" for i in holdings(r)[a.pid]), served(a.log())
        assert [line for line in a.log().splitlines() if "lost" in line] == []
    finally:
        producer._stop.set()  # a failed test must not leave its producer writing into the next one
        stop_all(processes)
