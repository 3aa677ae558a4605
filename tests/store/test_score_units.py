"""Time scores in Redis: seconds (before layout 3) and integer microseconds (after), read right in either unit.

A shard's writers switch to microseconds when its migration starts (scores_migrate.lua); a producer of an
older version may still write seconds into it. So every reader meets both, in one shard: these tests write
the seconds scores by hand, as the older version's scripts wrote them (``ZADD`` of the float's text).
"""

from __future__ import annotations

import msgpack
import pytest
from queue_support import (
    OrdersWorker,
    actions,
    held_lease,
    keys_of,
    microseconds,
    old_producer_push,
    queries,
    queue,
    queued,
    take,
)

from lowkiq.store import codec, lua, membership, score_units

US_AT = 1e12


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def raw_score(r, job_id: str) -> float:
    return r.zscore(keys_of(job_id).ids_by_perform_in_zset, job_id)


def test_an_unmigrated_shard_writes_seconds_and_a_migrated_one_integer_microseconds(r, clock):
    now = clock.now
    OrdersWorker.perform_async([{"id": "s", "perform_in": now + 30.25}])
    assert raw_score(r, "s") == pytest.approx(now + 30.25, abs=1e-6)
    microseconds("u")
    OrdersWorker.perform_async([{"id": "u", "perform_in": now + 30.25}])
    stored = raw_score(r, "u")
    assert stored >= US_AT and stored == int(stored)
    assert stored == round((now + 30.25) * 1_000_000)
    assert queued("u").perform_in == pytest.approx(now + 30.25, abs=1e-6)  # the API keeps seconds


def test_a_default_perform_in_is_now_in_microseconds_and_the_job_is_due(r, clock):
    microseconds("d")
    before = clock.now
    OrdersWorker.perform_async([{"id": "d", "payload": "x"}])
    assert raw_score(r, "d") >= US_AT
    assert queued("d").perform_in == pytest.approx(before, abs=2.0)
    [job] = take("d")
    assert job.id == "d" and job.perform_in == pytest.approx(before, abs=2.0)
    assert job.payloads[0][0] == "x"


def test_user_scores_keep_their_order_and_value_in_a_microseconds_shard(r):
    microseconds("v")
    OrdersWorker.perform_async([{"id": "v", "payload": "b", "score": 2.5}, {"id": "v", "payload": "a", "score": 1.25}])
    OrdersWorker.perform_async([{"id": "v", "payload": "c", "score": 1700000000.123456}])
    assert queued("v").payloads == [("a", 1.25), ("b", 2.5), ("c", 1700000000.123456)]


def same_shard_ids(count: int, prefix: str = "id") -> list[str]:
    q = queue()
    ids, n = [], 0
    while len(ids) < count:
        candidate = f"{prefix}-{n}"
        if not ids or q.shard_of(candidate) == q.shard_of(ids[0]):
            ids.append(candidate)
        n += 1
    return ids


@pytest.mark.parametrize("limit", [1, 4, 50])
def test_a_seconds_job_not_yet_due_neither_runs_early_nor_holds_back_due_microseconds_ones(r, limit, clock):
    later, *due = same_shard_ids(4, "mixed")
    microseconds(later)
    now = clock.now
    old_producer_push(r, later, now + 120)  # sorts first (seconds < microseconds), due in two minutes
    OrdersWorker.perform_async([{"id": i, "perform_in": now - 1} for i in due])
    q = queue()
    lease = held_lease(q, q.shard_of(later))
    taken: list[str] = []
    for _ in range(4):
        result = q.ack_and_take(None, (lease, limit))
        taken += [job.id for job in result.jobs]
    assert sorted(taken) == sorted(due)
    assert later not in taken
    assert result.next_perform_in == pytest.approx(now + 120, abs=1e-3)


@pytest.mark.parametrize("limit", [1, 2, 50])
def test_after_a_full_batch_the_next_head_is_a_due_microseconds_job_not_a_later_seconds_one(r, limit, clock):
    """The take stops at its batch size; the head it answers is what the server waits for."""
    *early, later, due = same_shard_ids(limit + 2, "full")
    microseconds(later)
    now = clock.now
    for job_id in early:
        old_producer_push(r, job_id, now - 1)
    old_producer_push(r, later, now + 300)
    OrdersWorker.perform_async([{"id": due, "perform_in": now - 0.5}])
    q = queue()
    lease = held_lease(q, q.shard_of(later))
    result = q.ack_and_take(None, (lease, limit))
    assert sorted(job.id for job in result.jobs) == sorted(early)
    assert result.next_perform_in == pytest.approx(now - 0.5, abs=1e-3)
    assert [job.id for job in q.ack_and_take(None, (lease, limit)).jobs] == [due]


@pytest.mark.parametrize("limit", [1, 50])
def test_a_due_seconds_job_runs_and_a_later_microseconds_one_waits(r, limit, clock):
    old, new = same_shard_ids(2, "mixed2")
    microseconds(old)
    now = clock.now
    old_producer_push(r, old, now - 5)
    OrdersWorker.perform_async([{"id": new, "perform_in": now + 90}])
    q = queue()
    lease = held_lease(q, q.shard_of(old))
    result = q.ack_and_take(None, (lease, limit))
    assert [job.id for job in result.jobs] == [old]
    assert result.jobs[0].perform_in == pytest.approx(now - 5, abs=1e-6)
    assert result.next_perform_in == pytest.approx(now + 90, abs=1e-3)
    assert q.ack_and_take(None, (lease, limit)).jobs == []


def test_the_earliest_head_is_found_across_units(r, clock):
    old, new = same_shard_ids(2, "heads")
    microseconds(old)
    now = clock.now
    old_producer_push(r, old, now + 300)
    OrdersWorker.perform_async([{"id": new, "perform_in": now + 60}])
    q = queue()
    lease = held_lease(q, q.shard_of(old))
    assert q.ack_and_take(None, (lease, 0)).next_perform_in == pytest.approx(now + 60, abs=1e-3)
    from lowkiq.server.heads import heads
    [head] = heads(q.client, [lease])
    assert head == pytest.approx(now + 60, abs=1e-3)


def test_a_failed_job_is_retried_and_then_dead_in_microseconds_and_requeued(r, clock):
    microseconds("f")
    OrdersWorker.perform_async([{"id": "f"}])
    q = queue()
    lease = held_lease(q, q.shard_of("f"))
    now = clock.now
    [job] = q.ack_and_take(None, (lease, 10)).jobs
    q.fail(lease, [("f", now + 45)], b"boom", OrdersWorker.max_retry_count)
    assert raw_score(r, "f") == round((now + 45) * 1_000_000)
    assert queued("f").perform_in == pytest.approx(now + 45, abs=1e-6)
    assert actions().kill(["f"]) == 1
    assert r.zscore(keys_of("f").morgue_ids_by_updated_at_zset, "f") >= US_AT
    assert queries().morgue_job("f").updated_at == pytest.approx(clock.now, abs=5)
    assert actions().morgue_requeue(["f"]) == 1
    assert raw_score(r, "f") >= US_AT
    assert queued("f").perform_in == pytest.approx(clock.now, abs=5)


def test_perform_all_now_moves_later_jobs_of_both_units(r, clock):
    a, b, c = same_shard_ids(3, "now")
    microseconds(a)
    now = clock.now
    old_producer_push(r, a, now + 500)
    OrdersWorker.perform_async([{"id": b, "perform_in": now + 600}, {"id": c, "perform_in": now - 10}])
    moved = actions().perform_all_now()
    assert moved == 2
    for job_id in (a, b):
        assert raw_score(r, job_id) >= US_AT
        assert queued(job_id).perform_in == pytest.approx(clock.now, abs=5)
    assert queued(c).perform_in == pytest.approx(now - 10, abs=1e-6)


def test_counts_and_pages_by_perform_in_read_seconds_in_either_unit(r, clock):
    a, b = same_shard_ids(2, "page")
    microseconds(a)
    now = clock.now
    old_producer_push(r, a, now + 100)
    OrdersWorker.perform_async([{"id": b, "perform_in": now + 200}])
    qs = queries()

    def count(**bounds):
        return qs.enqueued(order_by="perform_in", with_count=True, **bounds).matching

    assert count(min=now + 50, max=now + 250) == 2
    assert count(min=now + 150) == 1
    assert count(max=now + 150) == 1
    page = qs.enqueued(order_by="perform_in", min=now + 150)
    assert [job.id for job in page.rows] == [b]
    assert page.rows[0].perform_in == pytest.approx(now + 200, abs=1e-6)


def test_migration_converts_a_seconds_shard_in_bounded_chunks_and_records_layout_3(r, clock):
    ids = same_shard_ids(7, "mig")
    now = clock.now
    OrdersWorker.perform_async([{"id": i, "perform_in": now + n, "group": "g" if n % 2 else None}
                                for n, i in enumerate(ids)])
    shard = keys_of(ids[0])
    r.zadd(shard.morgue_ids_by_updated_at_zset, {"dead": repr(now - 3)})
    r.hset(shard.morgue_payloads_hash, "dead", msgpack.packb(["p", 1.0]))
    r.zadd(shard.morgue_ids_lex_zset, {"dead": 0})
    before = {job.id: job.perform_in for job in queries().enqueued(limit=100).rows}
    assert score_units.layout_of(queue().client, shard) == (1, False)
    steps = []
    while True:
        step = score_units.step_of(lua.run(queue().client, "scores_migrate", shard, (3,)))
        steps.append(step)
        assert step.queued <= 3 and step.dead <= 3
        if step.done:
            break
    assert [s.queued for s in steps] == [3, 3, 1]
    assert score_units.layout_of(queue().client, shard) == (3, True)
    assert all(score >= US_AT and score == int(score)
               for _, score in r.zrange(shard.ids_by_perform_in_zset, 0, -1, withscores=True))
    # the grouped ids' mirror holds the same scores, and their group index the same times
    for member, score in r.zrange(shard.grouped_ids_by_perform_in_zset, 0, -1, withscores=True):
        assert r.zscore(shard.ids_by_perform_in_zset, member) == score
    after = {job.id: job.perform_in for job in queries().enqueued(limit=100).rows}
    assert after.keys() == before.keys()
    assert all(after[i] == pytest.approx(before[i], abs=1e-6) for i in before)
    assert r.zscore(shard.morgue_ids_by_updated_at_zset, "dead") == round((now - 3) * 1_000_000)
    assert queries().morgue_jobs(["dead"])[0].updated_at == pytest.approx(now - 3, abs=1e-6)
    # a seconds score an older producer writes later is converted on the next pass
    [late] = same_shard_ids(1, ids[0])
    old_producer_push(r, late, now + 1)
    step = score_units.step_of(lua.run(queue().client, "scores_migrate", shard, (3,)))
    assert (step.queued, step.done) == (1, True)
    assert raw_score(r, late) == round((now + 1) * 1_000_000)
    # drains: every id, each once, in its group rotation
    q = queue()
    lease = held_lease(q, q.shard_of(ids[0]))
    clock.advance(10)
    taken: list[str] = []
    for _ in range(20):
        taken += [job.id for job in q.ack_and_take(None, (lease, 2)).jobs]
    assert sorted(taken) == sorted([*ids, late])
    assert r.zcard(shard.grouped_ids_lex_zset) == 0 and r.zcard(shard.ids_by_perform_in_zset) == 0


def test_the_migration_waits_for_every_live_server_to_read_microseconds():
    new = membership.parse("a", membership.info(threads=1, version="x", state="running", started_ms=0, queues=[],
                                                hint=None, stable_name="", shards={}, ttl_ms=1000), 1e15)
    old_record = membership.info(threads=1, version="x", state="running", started_ms=0, queues=[], hint=None,
                                 stable_name="", shards={}, ttl_ms=1000).replace(',"scores":"us"', "")
    old = membership.parse("b", old_record, 1e15)
    assert new is not None and old is not None
    assert new.scores == "us" and old.scores == ""
    assert score_units.cluster_reads_us([new])
    assert not score_units.cluster_reads_us([new, old])
    assert not score_units.cluster_reads_us([])


def test_a_perform_in_past_the_seconds_range_stays_far_in_the_future(r):
    OrdersWorker.perform_async([{"id": "far", "perform_in": 5e12}])
    assert raw_score(r, "far") < US_AT
    assert queued("far").perform_in == codec.LATEST_SECONDS
    assert take("far") == []


def test_codec_reads_both_units():
    assert codec.seconds(b"1700000000.5") == 1700000000.5
    assert codec.seconds(b"1700000000500000") == 1700000000.5
    assert codec.time_ranges("", "") == [("-inf", "(1000000000000"), ("1000000000000", "+inf")]
    assert codec.time_ranges("10.5", "20") == [("10.5", "20"), ("1000000000000", "20000000")]
