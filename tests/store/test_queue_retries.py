"""SPEC's retry table, the morgue rule, and restore of processing data."""

import pytest
from queue_support import OrdersWorker, fail, held_lease, queries, queue, queued, restore, take


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def test_retry_table(clock):
    worker = OrdersWorker()
    OrdersWorker.perform_async([{"id": 1, "payload": "v1"}])
    # new, never run
    assert (queued("1").retry_count, queued("1").perform_in) == (-1, clock.now)
    # new, failed once: retry_count 0, perform_in now + retry_in(0)
    (job,) = take("1")
    due = clock.now + worker.retry_in(job.retry_count + 1)
    fail("1", due)
    assert (queued("1").retry_count, queued("1").perform_in) == (0, due)
    assert 15 <= due - clock.now <= 15 + 29
    # retry failed: retry_count 1, perform_in now + retry_in(1)
    assert take("1") == []  # retry_in(0) >= 15: not due yet
    clock.advance(100)
    assert [j.retry_count for j in take("1")] == [0]
    due = clock.now + worker.retry_in(1)
    fail("1", due)
    assert (queued("1").retry_count, queued("1").perform_in) == (1, due)
    assert 16 <= due - clock.now <= 16 + 29 * 2


def test_default_retry_in_formula():
    worker = OrdersWorker()
    for count, base in [(0, 15), (1, 16), (2, 31), (3, 96), (4, 271)]:
        values = {worker.retry_in(count) for _ in range(300)}
        assert min(values) >= base and max(values) <= base + 29 * (count + 1)
        assert len(values) > 1  # jitter
    assert sum(OrdersWorker().retry_in(c) - 29 * (c + 1) / 2 for c in range(25)) / 86400 == pytest.approx(20, abs=1.5)


def test_take_hands_out_earliest_perform_in_first_and_only_ready_jobs(clock):
    OrdersWorker.perform_async([{"id": "a", "perform_in": clock.now - 5}, {"id": "b", "perform_in": clock.now - 50}])
    OrdersWorker.perform_async([{"id": "c", "perform_in": clock.now + 50}])
    q = queue()
    same_shard = [i for i in ("a", "b", "c") if q.shard_of(i) == q.shard_of("b")]
    taken = q.ack_and_take(None, (held_lease(q, q.shard_of("b")), 10))
    assert [j.id for j in taken.jobs] == [i for i in ("b", "a") if i in same_shard]


def test_take_respects_the_limit_and_reports_the_next_due_job(clock):
    ids = [str(i) for i in range(60) if queue().shard_of(str(i)) == 0][:5]
    OrdersWorker.perform_async([{"id": i, "perform_in": clock.now - 10 + n} for n, i in enumerate(ids)])
    taken = queue().ack_and_take(None, (held_lease(queue(), 0), 2))
    assert [j.id for j in taken.jobs] == ids[:2]
    assert taken.next_perform_in == clock.now - 10 + 2
    assert len(queries().busy()) == 2


# A small batch is read by rank, a bigger one (past 16) by score: both report the same next job.
@pytest.mark.parametrize("limit", [2, 3, 5, 40])
def test_the_next_due_job_is_reported_whether_it_is_due_or_not(clock, limit):
    ids = [str(i) for i in range(60) if queue().shard_of(str(i)) == 0][:4]
    due = [{"id": i, "perform_in": clock.now - 10 + n} for n, i in enumerate(ids[:3])]
    OrdersWorker.perform_async([*due, {"id": ids[3], "perform_in": clock.now + 30}])
    q = queue()
    lease = held_lease(q, 0)
    taken = q.ack_and_take(None, (lease, limit))
    assert [j.id for j in taken.jobs] == ids[:min(limit, 3)]
    assert taken.next_perform_in == (clock.now - 10 + 2 if limit == 2 else clock.now + 30)
    rest = q.ack_and_take((lease, [j.id for j in taken.jobs]), (lease, 10))
    assert [j.id for j in rest.jobs] == ids[limit:3] and rest.next_perform_in == clock.now + 30
    q.ack_and_take((lease, [j.id for j in rest.jobs]), None)
    assert q.ack_and_take(None, (lease, 10)).next_perform_in == clock.now + 30


def test_ack_counts_processed_and_clears_processing(clock):
    ids = [str(i) for i in range(60) if queue().shard_of(str(i)) == 1][:3]
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    lease = held_lease(q, 1)
    first = q.ack_and_take(None, (lease, 2))
    second = q.ack_and_take((lease, [j.id for j in first.jobs]), (lease, 2))
    assert [j.id for j in second.jobs] == ids[2:]
    assert q.ack_and_take((lease, [j.id for j in second.jobs]), (lease, 2)).jobs == []
    assert queries().busy() == []
    from lowkiq.store.metrics import queue_metrics

    assert queue_metrics(queue().client, [OrdersWorker.keys()])[0].processed == 3


def test_ack_on_one_shard_and_take_on_another_in_one_round_trip(clock, monkeypatch):
    from queue_support import RoundTrips

    a = next(str(i) for i in range(99) if queue().shard_of(str(i)) == 0)
    b = next(str(i) for i in range(99) if queue().shard_of(str(i)) == 2)
    OrdersWorker.perform_async([{"id": a}, {"id": b}])
    q = queue()
    first, second = held_lease(q, 0), held_lease(q, 2)
    q.ack_and_take(None, (first, 1))
    trips = RoundTrips(monkeypatch)
    taken = q.ack_and_take((first, [a]), (second, 1))
    assert trips.count == 1
    assert [j.id for j in taken.jobs] == [b]
    assert [j.id for j in queries().busy()] == [b]


def test_morgue_rule_oldest_payload_dies_the_rest_returns_fresh(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": p, "score": s} for p, s in [("v3", 3), ("v1", 1), ("v2", 2)]])
    # max_retry_count retries after the first try: retry_count runs -1, 0, 1, 2
    for _attempt in range(OrdersWorker.max_retry_count):
        take("1")
        assert fail("1", clock.now) == []
    assert queued("1").retry_count == OrdersWorker.max_retry_count - 1
    take("1")
    clock.advance(5)
    morgued = fail("1", clock.now + 999, b"gave up")
    assert [(m.id, m.payloads, m.error) for m in morgued] == [("1", [("v1", 1.0)], "gave up")]
    dead = queries().morgue_job("1")
    assert (dead.payloads, dead.updated_at, dead.error) == ([("v1", 1.0)], clock.now, "gave up")
    back = queued("1")
    assert (back.payloads, back.retry_count, back.perform_in, back.error) == ([("v2", 2.0), ("v3", 3.0)], -1, clock.now, None)


def test_single_payload_job_goes_to_the_morgue_whole(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "only"}])
    for _ in range(OrdersWorker.max_retry_count + 1):
        take("1")
        fail("1", clock.now)
    assert queued("1") is None
    assert queries().morgue_job("1").payloads == [("only", clock.now)]


def test_a_payload_entering_the_morgue_joins_the_morgue_job_with_newest_error(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "a", "score": 1}])
    for _ in range(OrdersWorker.max_retry_count + 1):
        take("1")
        fail("1", clock.now, b"first")
    clock.advance(10)
    OrdersWorker.perform_async([{"id": 1, "payload": "b", "score": 2}, {"id": 1, "payload": "a", "score": 0.5}])
    for _ in range(OrdersWorker.max_retry_count + 1):
        take("1")
        fail("1", clock.now, b"second")
    dead = queries().morgue_job("1")
    # "a" came back with a lower score: the morgue keeps the lower one.
    assert dead.payloads == [("a", 0.5)]
    assert (dead.updated_at, dead.error) == (clock.now, "second")
    assert queued("1").payloads == [("b", 2.0)]


def test_fail_counts_failed_and_every_job_of_the_batch(clock):
    ids = [str(i) for i in range(60) if queue().shard_of(str(i)) == 0][:4]
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    taken = q.ack_and_take(None, (held_lease(q, 0), 10))
    q.fail(held_lease(q, 0), [(j.id, clock.now + 30) for j in taken.jobs], b"batch failed", 3)
    assert all(queued(i).retry_count == 0 and queued(i).error == "batch failed" for i in ids)
    from lowkiq.store.metrics import queue_metrics

    assert queue_metrics(q.client, [OrdersWorker.keys()])[0].failed == 4


def test_restore_moves_processing_back_with_its_own_schedule(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "v1", "score": 1}])
    take("1")
    fail("1", clock.now - 1, b"earlier")
    (job,) = take("1")
    assert job.retry_count == 0 and job.error == "earlier"
    # The process dies mid-perform; meanwhile a new version arrives.
    OrdersWorker.perform_async([{"id": 1, "payload": "v2", "score": 2, "perform_in": clock.now + 500}])
    assert restore(queue(), held_lease(queue(), queue().shard_of("1"))) == 1
    back = queued("1")
    assert back.payloads == [("v1", 1.0), ("v2", 2.0)]
    assert (back.retry_count, back.perform_in, back.error) == (0, job.perform_in, "earlier")
    assert queries().busy() == []


def test_restore_of_selected_shards_only(clock):
    ids = {s: next(str(i) for i in range(99) if queue().shard_of(str(i)) == s) for s in range(3)}
    OrdersWorker.perform_async([{"id": i} for i in ids.values()])
    for s in range(3):
        queue().ack_and_take(None, (held_lease(queue(), s), 5))
    assert restore(queue(), held_lease(queue(), 0)) + restore(queue(), held_lease(queue(), 2)) == 2
    assert [j.id for j in queries().busy()] == [ids[1]]


def test_queue_cleanup_leaves_no_keys_behind(r, clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "x"}])
    (job,) = take("1")
    fail("1", clock.now, b"e")
    take("1")
    queue().ack_and_take((held_lease(queue(), queue().shard_of("1")), ["1"]), None)
    leftover = sorted(k.decode() for k in r.keys("*"))
    # each id's history stays, bounded by history_length and history_max_age (docs/history.md)
    assert [k for k in leftover if not k.endswith((":counters", ":registry", ":lease", ":layouts", ":events"))] == []


@pytest.mark.parametrize("limit", [1, 3, 40])
def test_a_queue_taken_whole_reports_no_next_job(clock, limit):
    ids = [str(i) for i in range(60) if queue().shard_of(str(i)) == 0][:3]
    OrdersWorker.perform_async([{"id": i, "perform_in": clock.now - 10 + n} for n, i in enumerate(ids[:limit])])
    q = queue()
    taken = q.ack_and_take(None, (held_lease(q, 0), limit))
    assert [j.id for j in taken.jobs] == ids[:limit]
    assert taken.next_perform_in is None
