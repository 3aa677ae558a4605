"""Upgrading to integer microsecond scores: queues the previous version wrote, and a rolling deploy.

The previous version runs from a git worktree of its commit (tests/upgrade_support.py), in subprocesses,
beside this tree's code on one redis-server. Nothing may be lost, nothing may run before its perform_in,
and every shard ends migrated (layout 3, no seconds score left).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis
from timing_support import wait_until
from upgrade_support import ROOT, Side, performed, previous_tree

from lowkiq.store import membership, score_units
from lowkiq.store.keys import QueueKeys

pytestmark = pytest.mark.slow

KEYS = QueueKeys("upgrade", 8)
US_AT = 1e12
# perform's start is read by the host's clock, the take's "now" by Redis's (the same host here)
CLOCKS = 0.002


def seconds_scores(r: redis.Redis) -> int:
    """Time scores still in seconds, in the queue and the morgue of every shard."""
    return sum(r.zcount(shard.ids_by_perform_in_zset, "-inf", f"({US_AT:.0f}")
               + r.zcount(shard.morgue_ids_by_updated_at_zset, "-inf", f"({US_AT:.0f}")
               for shard in KEYS.shards())


def migrated(r: redis.Redis) -> bool:
    return all(r.hmget(shard.lease_hash, "layout", "scores") == [b"3", b"us"] for shard in KEYS.shards())


def expected(produced: dict[str, Any]) -> dict[str, tuple[str, float]]:
    """Payload -> (id, due) of every payload a producer enqueued and did not kill."""
    killed = set(produced["killed"])
    return {n: (job_id, due) for n, (job_id, due) in produced["sent"].items() if job_id not in killed}


def check_drained(tmp: Path, wanted: dict[str, tuple[str, float]]) -> list[dict[str, Any]]:
    """Every wanted payload performed at least once, none before its due time; returns the performs."""
    runs = performed(tmp)
    done = {run["n"] for run in runs}
    lost = sorted(set(wanted) - done)
    assert not lost, f"{len(lost)} payloads never performed, e.g. {lost[:5]}"
    early = [run for run in runs if run["n"] in wanted and run["at"] < wanted[run["n"]][1] - CLOCKS]
    assert not early, f"{len(early)} payloads performed before their perform_in, e.g. {early[:3]}"
    return runs


def test_a_queue_the_previous_version_wrote_is_migrated_in_place_and_drained(tmp_path, redis_url, r):
    with previous_tree(tmp_path) as tree:
        old = Side("old", tree)
        produced = old.produced(old.producer(tmp_path, redis_url, "a", 3000, 0.5, later=5, kill=20))
    wanted = expected(produced)
    # written the old way: seconds everywhere, a morgue, grouped ids, no layout 3
    queued_before = sum(r.zcard(shard.ids_by_perform_in_zset) for shard in KEYS.shards())
    dead_before = sum(r.zcard(shard.morgue_ids_by_updated_at_zset) for shard in KEYS.shards())
    assert queued_before > 0 and dead_before == 20
    assert seconds_scores(r) == queued_before + dead_before
    assert sum(r.zcard(shard.grouped_ids_by_perform_in_zset) for shard in KEYS.shards()) > 0
    assert not any(r.hget(shard.lease_hash, "layout") == b"3" for shard in KEYS.shards())

    server = Side("new", ROOT).server(tmp_path, redis_url)
    try:
        wait_until(lambda: {run["n"] for run in performed(tmp_path)} >= set(wanted), timeout=90)
        wait_until(lambda: migrated(r) and seconds_scores(r) == 0, timeout=30)
    finally:
        assert server.stop() == 0, server.log()[-3000:]
    runs = check_drained(tmp_path, wanted)
    assert len(runs) == len(wanted), "a payload performed twice"  # no crash here: each exactly once
    # the dead jobs were converted too, and read back in seconds
    dead_after = [score for shard in KEYS.shards()
                  for _, score in r.zrange(shard.morgue_ids_by_updated_at_zset, 0, -1, withscores=True)]
    assert len(dead_after) == dead_before and all(score >= US_AT for score in dead_after)
    assert all(abs(score / 1e6 - time.time()) < 300 for score in dead_after)


def test_jobs_a_killed_server_of_the_previous_version_left_in_processing_run_on_the_new_one(tmp_path, redis_url, r):
    with previous_tree(tmp_path) as tree:
        old = Side("old", tree)
        produced = old.produced(old.producer(tmp_path, redis_url, "k", 600, 0.2, later=4))
        server = old.server(tmp_path, redis_url, UPGRADE_SLEEP="60")  # its batches never end
        try:
            wait_until(lambda: sum(r.hlen(s.processing_hash) for s in KEYS.shards()) >= 5, timeout=30)
        finally:
            server.kill()  # kill -9: its batches stay in processing, their records written in seconds
    in_flight = {run["n"] for run in performed(tmp_path)}
    assert in_flight
    wanted = expected(produced)
    new = Side("new", ROOT).server(tmp_path, redis_url)
    try:
        wait_until(lambda: {run["n"] for run in performed(tmp_path) if run["side"] == "new"} >= set(wanted),
                   timeout=90)
        wait_until(lambda: migrated(r) and seconds_scores(r) == 0, timeout=30)
    finally:
        assert new.stop() == 0, new.log()[-3000:]
    runs = check_drained(tmp_path, wanted)
    again = [run for run in runs if run["side"] == "new" and run["n"] in in_flight]
    assert {run["n"] for run in again} == in_flight  # the killed batches ran again, on the new server
    assert sum(r.hlen(s.processing_hash) for s in KEYS.shards()) == 0


def test_a_rolling_deploy_under_load_loses_nothing_and_runs_nothing_early(tmp_path, redis_url, r):
    with previous_tree(tmp_path) as tree:
        old, new = Side("old", tree), Side("new", ROOT)
        old_server = old.server(tmp_path, redis_url)
        old_producer = old.producer(tmp_path, redis_url, "old", 6000, 14, later=3)
        new_server = new_producer = None
        try:
            time.sleep(2)
            new_server = new.server(tmp_path, redis_url)
            new_producer = new.producer(tmp_path, redis_url, "new", 4000, 8, later=3)
            wait_until(lambda: len(membership.live(r)) == 2, timeout=20)
            # both versions serve: nothing may be written in microseconds while the old one reads seconds only
            time.sleep(3)
            assert not any(score_units.layout_of(_Client(r), shard)[1] for shard in KEYS.shards())
            assert not any(r.zcount(s.ids_by_perform_in_zset, f"{US_AT:.0f}", "+inf") for s in KEYS.shards())
            assert old_server.stop() == 0, old_server.log()[-3000:]
            # the new server alone: its shards migrate while the old producer still writes seconds
            wait_until(lambda: all(score_units.layout_of(_Client(r), shard)[1] for shard in KEYS.shards()),
                       timeout=20)
            wanted = {**expected(old.produced(old_producer)), **expected(new.produced(new_producer))}
            wait_until(lambda: {run["n"] for run in performed(tmp_path)} >= set(wanted), timeout=120)
            wait_until(lambda: migrated(r) and seconds_scores(r) == 0, timeout=30)
        finally:
            for process in (old_server, new_server):
                if process is not None:
                    process.stop()
            for producer in (old_producer, new_producer):
                if producer is not None and producer.poll() is None:
                    producer.kill()
    runs = check_drained(tmp_path, wanted)
    sides = {run["side"] for run in runs}
    assert sides == {"old", "new"}, sides
    # payloads the old producer wrote in seconds after the migration began ran on the new server
    assert any(run["side"] == "new" and run["n"].startswith("old:") for run in runs)


class _Client:
    """``score_units.layout_of`` reads through the transport's pipeline_commands; here, plain redis-py."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r

    def pipeline_commands(self, commands):
        pipe = self.r.pipeline(transaction=False)
        for _, command in commands:
            pipe.execute_command(*command)
        return pipe.execute()
