"""Ids that hold many payloads (_spill.lua): past 64 an id's payloads live in the shard's spilled
keys, so one more version costs the same whatever the id holds; every path that reads or moves payloads
(the take, a retry, the morgue both ways, deletes, the console, the caps) sees the same payloads as before."""

from __future__ import annotations

import pytest
from queue_support import OrdersWorker, actions, fail, held_lease, queries, queue, queued, take

import lowkiq

T = 1_700_000_000.0


class Capped(lowkiq.Worker):
    shards_count = 2
    max_payloads_per_id = 100

    def perform(self, payloads_by_id):
        pass


class Strict(lowkiq.Worker):
    shards_count = 1
    max_payloads_per_id = 100
    payload_overflow = "reject"

    def perform(self, payloads_by_id):
        pass


class WholeId(lowkiq.Worker):
    shards_count = 2
    morgue_policy = "whole_id"

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker, Capped, Strict, WholeId])


def versions(job_id: str, first: int, last: int) -> list[dict]:
    return [{"id": job_id, "payload": f"v{v}", "score": v} for v in range(first, last + 1)]


def spilled_keys(worker, job_id: str) -> tuple[str, str]:
    shard = worker.keys().shard(lowkiq.current().queue(worker).shard_of(job_id))
    return shard.spilled_payloads_zset, shard.spilled_scores_hash


def expected(first: int, last: int) -> list[tuple[str, float]]:
    return [(f"v{v}", float(v)) for v in range(first, last + 1)]


def test_a_failed_spilled_id_comes_back_merged_with_what_came_meanwhile(r):
    OrdersWorker.perform_async(versions("hot", 1, 200))
    [job] = take("hot")
    assert job.payloads == expected(1, 200)
    OrdersWorker.perform_async(versions("hot", 201, 400))  # queued anew while it performs: spilled again
    fail("hot", T)
    back = queued("hot")
    assert back.payloads == expected(1, 400) and back.retry_count == 0
    [again] = take("hot")
    assert again.payloads == expected(1, 400)
    assert r.exists(*spilled_keys(OrdersWorker, "hot")) == 0


def test_killed_and_requeued_deleted_spilled_ids_leave_nothing_behind(r):
    OrdersWorker.perform_async(versions("a", 1, 150) + versions("b", 1, 150))
    assert actions().kill(["a"]) == 1
    dead = queries().morgue_job("a")
    assert dead is not None and dead.payloads == expected(1, 150)
    assert actions().morgue_requeue(["a"]) == 1
    assert queued("a").payloads == expected(1, 150)
    assert actions().delete(["a", "b"]) == 2
    assert r.exists(*spilled_keys(OrdersWorker, "a"), *spilled_keys(OrdersWorker, "b")) == 0


def test_the_console_reads_a_spilled_id_whole_or_cut(r):
    OrdersWorker.perform_async(versions("hot", 1, 500))
    assert queued("hot").payloads == expected(1, 500)
    page = queries().enqueued("id", limit=10)
    [row] = page.rows
    assert row.id == "hot" and row.clipped is not None and row.clipped.payloads == 500
    whole = row.payloads[:-1]  # the last one shown may be cut at the listing's byte cap
    assert whole == expected(1, len(whole)) and 0 < row.clipped.shown < 500


def test_a_cap_on_a_spilled_id_drops_the_oldest_or_refuses_the_slice(r):
    Capped.perform_async(versions("c", 1, 90))
    Capped.perform_async(versions("c", 91, 130))
    assert lowkiq.current().queries(Capped).job("c").payloads == expected(31, 130)
    Strict.perform_async(versions("s", 1, 100))
    from queue_support import snapshot

    before = snapshot(r)
    with pytest.raises(Exception, match=r"PAYLOAD_LIMIT id s would hold 101 payloads; the limit is 100"):
        Strict.perform_async(versions("s", 101, 101) + versions("t", 1, 3))
    assert snapshot(r) == before  # nothing of the slice: not even t
    Strict.perform_async(versions("s", 50, 50))  # held already: no new payload, within the cap
    assert lowkiq.current().queries(Strict).job("s").payloads == expected(1, 100)


def test_a_whole_id_morgue_takes_a_spilled_id_queued_meanwhile(r):
    q = lowkiq.current().queue(WholeId)
    WholeId.perform_async(versions("w", 1, 10))
    lease = held_lease(q, q.shard_of("w"))
    q.ack_and_take(None, (lease, 10))
    WholeId.perform_async(versions("w", 11, 200))
    q.fail(lease, [("w", T)], b"boom", 0, morgue_policy="whole_id")  # max_retry_count 0: to the morgue
    dead = lowkiq.current().queries(WholeId).morgue_job("w")
    assert dead is not None and dead.payloads == expected(1, 200)
    assert lowkiq.current().queries(WholeId).job("w") is None
    assert r.exists(*spilled_keys(WholeId, "w")) == 0


def commands_of_one_version(r, job_id: str, v: int) -> dict[str, int]:
    r.config_resetstat()
    OrdersWorker.perform_async([{"id": job_id, "payload": f"v{v}", "score": v}])
    stats = r.info("commandstats")
    return {name: int(s["calls"]) for name, s in stats.items() if not name.startswith("cmdstat_config")}


def test_one_more_version_runs_the_same_commands_whatever_the_id_holds(r):
    """The merge path's cost does not grow with the id's depth: the same Redis commands, each O(log n)
    or O(1), at 100 payloads and at 20,000 (a rewrite of the id's list would show as one HSET of it all)."""
    OrdersWorker.perform_async(versions("hot", 1, 100))
    shallow = commands_of_one_version(r, "hot", 101)
    for first in range(102, 20_002, 2000):
        OrdersWorker.perform_async(versions("hot", first, first + 1999))
    deep = commands_of_one_version(r, "hot", 30_000)
    assert shallow == deep, (shallow, deep)
    assert queued("hot").payloads[-1] == ("v30000", 30_000.0)
    shard = OrdersWorker.keys().shard(queue().shard_of("hot"))
    field = r.hget(shard.payloads_hash, "hot")
    assert field == b"\xc1" + str(20_102).encode()  # the id's own field stays a few bytes


def test_the_hot_path_runs_a_fixed_number_of_redis_commands_per_job(r):
    """At batch_size 1, Lowkiq's shape: one script per job, and inside it this many commands (a regression
    in the hot path's Redis cost shows here first)."""
    OrdersWorker.perform_async([{"id": f"j{i}", "payload": i} for i in range(200)])
    q = queue()
    leases = [held_lease(q, shard) for shard in range(OrdersWorker.shards_count)]
    in_hand = {}
    for lease in leases:  # each shard's first take: from then on every call acknowledges one and takes one
        in_hand[id(lease)] = [job.id for job in q.ack_and_take(None, (lease, 1)).jobs]
    r.config_resetstat()
    jobs = 0
    for lease in leases:
        acked = in_hand[id(lease)]
        for _ in range(20):
            taken = q.ack_and_take((lease, acked), (lease, 1))
            acked = [job.id for job in taken.jobs]
            jobs += len(acked)
    stats = r.info("commandstats")
    scripts = int(stats["cmdstat_evalsha"]["calls"])
    inside = {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()
              if name != "cmdstat_evalsha" and not name.startswith("cmdstat_config")}  # Redis 6.2: "config"
    assert jobs == scripts == 3 * 20
    per_job = {name: calls / jobs for name, calls in sorted(inside.items())}
    assert per_job == HOT_PATH_COMMANDS_PER_JOB, per_job


# What one ack + take of one job runs inside its script: Redis's clock (TIME), the lease check (HMGET), one
# probe for the rare structures (EXISTS), the ack (HDEL processing, HINCRBY processed), the take
# (ZRANGE by rank one past the batch, which also gives the next head; HMGET payloads; HSET processing;
# ZREMRANGEBYRANK from the due index and ZREM from the id index; HDEL payloads), the lease's renewal (HSET)
# and the ids' history (one XADD for the ack and the take together).
HOT_PATH_COMMANDS_PER_JOB: dict[str, float] = {
    "exists": 1.0, "hdel": 2.0, "hincrby": 1.0, "hmget": 2.0, "hset": 2.0, "time": 1.0,
    "xadd": 1.0, "zrange": 1.0, "zrem": 1.0, "zremrangebyrank": 1.0,
}


def test_a_take_ahead_call_runs_the_commands_of_a_take_of_one_for_16_jobs(r):
    """Take-ahead (docs/take-ahead.md): the same commands as a take of one id, whatever the number of ids."""
    OrdersWorker.perform_async([{"id": f"j{i}", "payload": i} for i in range(600)])
    q = queue()
    leases = [held_lease(q, shard) for shard in range(OrdersWorker.shards_count)]
    in_hand = {id(lease): [job.id for job in q.ack_and_take(None, (lease, -16)).jobs] for lease in leases}
    r.config_resetstat()
    jobs = 0
    for lease in leases:
        acked = in_hand[id(lease)]
        for _ in range(5):
            taken = q.ack_and_take((lease, acked), (lease, -16))
            acked = [job.id for job in taken.jobs]
            assert len(acked) == 16
            jobs += 16
    stats = r.info("commandstats")
    inside = {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()
              if name != "cmdstat_evalsha" and not name.startswith("cmdstat_config")}
    assert int(stats["cmdstat_evalsha"]["calls"]) == 3 * 5
    assert {name: calls / 15 for name, calls in sorted(inside.items())} == HOT_PATH_COMMANDS_PER_JOB
    assert sum(inside.values()) / jobs == sum(HOT_PATH_COMMANDS_PER_JOB.values()) / 16
