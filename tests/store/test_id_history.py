"""Each id's history, at the store level against a real Redis: every step that moves an id writes what
happened, and reading it back gives the id's events newest first (docs/history.md)."""

from typing import Any

import pytest
from queue_support import OrdersWorker, fail, held_lease, queue, take

import lowkiq
from lowkiq.store.id_history import IdHistories


class QuietWorker(lowkiq.Worker):
    shards_count = 2
    history_length = 0

    def perform(self, payloads_by_id: Any) -> None:
        pass


class ShortWorker(lowkiq.Worker):
    shards_count = 1
    history_length = 50

    def perform(self, payloads_by_id: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker, QuietWorker, ShortWorker])


def history(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker, **kw: Any):
    return lowkiq.current().histories(worker).of(job_id, **kw)


def kinds(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker) -> list[str]:
    return [e.kind for e in reversed(history(job_id, worker).events)]


def test_enqueue_take_perform_fail_and_morgue_are_each_written_with_where_and_how(clock):
    OrdersWorker.perform_async([{"id": "o1", "payload": "v1"}, {"id": "o1", "payload": "v2"}])
    OrdersWorker.perform_async([{"id": "o1", "payload": "v3"}])
    q = queue()
    lease = held_lease(q, q.shard_of("o1"))
    (job,) = q.ack_and_take(None, (lease, 10), thread="t-7").jobs
    fail("o1", clock.now, error=b"ValueError: nope")
    take("o1")
    q.ack_and_take((lease, ["o1"]), None, thread="t-7")

    h = history("o1")
    assert h.complete and h.examined >= 5
    assert [e.kind for e in reversed(h.events)] == ["enqueued", "merged", "taken", "failed", "taken", "performed"]
    enqueued, merged, taken = h.events[-1], h.events[-2], h.events[-3]
    assert (enqueued.versions, merged.versions) == (2, 1)
    assert taken.thread == "t-7" and taken.server == "tests"
    assert taken.fencing_token == f"{lease.fencing_token[0]}:{lease.fencing_token[1]}"
    failed = h.events[-4]
    assert failed.error == "ValueError: nope" and failed.retry_count == 0 and failed.perform_in == clock.now
    assert h.events[0].kind == "performed" and h.events[0].at >= h.events[-1].at


def test_retries_exhausted_show_every_attempts_error_and_the_morgue(clock):
    OrdersWorker.perform_async([{"id": "m", "payload": "v"}])
    for attempt in range(OrdersWorker.max_retry_count + 1):  # the first try, then max_retry_count retries
        take("m")
        fail("m", clock.now, error=f"Boom: attempt {attempt}".encode())
    events = list(reversed(history("m").events))
    failures = [e for e in events if e.kind == "failed"]
    assert [(e.retry_count, e.error) for e in failures] == [(n, f"Boom: attempt {n}") for n in range(4)]
    assert failures[-1].perform_in is None  # it died
    assert events[-1].kind == "morgued" and "retries exhausted" in (events[-1].reason or "")


def test_a_batch_failure_names_its_batch_and_a_partial_failure_the_id_that_raised(clock):
    q = queue()
    shard = q.shard_of("a")
    ids = [i for i in (f"b{n}" for n in range(40)) if q.shard_of(i) == shard][:2]
    OrdersWorker.perform_async([{"id": "a", "payload": 1}] + [{"id": i, "payload": 1} for i in ids])
    lease = held_lease(q, shard)
    q.ack_and_take(None, (lease, 10))
    q.fail(lease, [(job_id, clock.now) for job_id in ["a", *ids]], b"RuntimeError: batch", 5)
    (failed,) = [e for e in history(ids[0]).events if e.kind == "failed"]
    assert failed.batch_size == 3 and set(failed.batch) == {"a", ids[1]} and not failed.own_error
    assert "its batch of 3 failed together" in failed.summary

    q.ack_and_take(None, (lease, 10))
    q.fail(lease, [("a", clock.now)], b"", 5, errors={"a": b"KeyError: 'x'"}, acked=ids)
    newest_a = history("a").events[0]
    assert newest_a.kind == "failed" and newest_a.own_error and newest_a.error == "KeyError: 'x'"
    assert newest_a.raised == ("a",) and "it raised this error itself (PartialFailure)" in newest_a.summary
    assert set(newest_a.batch) == set(ids) and newest_a.batch_size == 3  # its batch-mates, performed
    newest_b = history(ids[0]).events[0]
    assert newest_b.kind == "performed" and "a failed" in (newest_b.reason or "")
    assert newest_b.raised == ("a",) and set(newest_b.batch) == {"a", ids[1]}
    assert failed.raised == ()  # a whole batch's failure cannot say which id raised


def test_operators_actions_name_who_acted(clock):
    OrdersWorker.perform_async([{"id": "x", "payload": 1, "perform_in": clock.now + 3600}])
    lowkiq.current().actions(OrdersWorker, actor="alice").perform_now(["x"])
    lowkiq.current().actions(OrdersWorker, actor="bob").kill(["x"])
    lowkiq.current().actions(OrdersWorker, actor="carol").morgue_requeue(["x"])
    lowkiq.current().actions(OrdersWorker).delete(["x"])
    events = list(reversed(history("x").events))
    assert [(e.kind, e.actor) for e in events] == [
        ("enqueued", None), ("performed_now", "alice"), ("killed", "bob"), ("requeued", "carol"), ("deleted", "")]
    assert events[-1].summary.endswith("by an unknown operator")


def test_a_takeover_says_the_batch_went_back_because_its_server_died(clock):
    from queue_support import acquire

    OrdersWorker.perform_async([{"id": "t", "payload": 1}])
    q = queue()
    shard = q.shard_of("t")
    mine = acquire(q, shard, "server-a", ttl=0.05)
    q.ack_and_take(None, (mine, 10))
    clock.advance(1)
    import time

    time.sleep(0.1)  # the lease's ttl is Redis time
    acquire(q, shard, "server-b")
    restored = history("t").events[0]
    assert restored.kind == "restored" and restored.server == "server-b"
    assert "server-a stopped renewing" in (restored.reason or "")


def test_a_worker_without_history_writes_none(r):
    QuietWorker.perform_async([{"id": n, "payload": n} for n in range(20)])
    q = queue(QuietWorker)
    for shard in range(2):
        q.ack_and_take(None, (held_lease(q, shard), 50))
        assert r.exists(q.keys.shard(shard).events_stream) == 0
    assert history("3", QuietWorker).events == []


def test_the_stream_keeps_about_history_length_entries_and_a_long_walk_is_bounded(r):
    for n in range(400):
        ShortWorker.perform_async([{"id": "hot", "payload": n}])
    key = queue(ShortWorker).keys.shard(0).events_stream
    # '~': whole listpack nodes go, so a little more than history_length may stay
    assert 50 <= r.xlen(key) < 250
    h = history("hot", ShortWorker, limit=10)
    assert len(h.events) == 10 and not h.complete
    assert [e.kind for e in h.events] == ["merged"] * 10


def test_trim_by_age_drops_old_entries(r):
    from lowkiq.store import lua
    from lowkiq.store.id_history import trim_call

    OrdersWorker.perform_async([{"id": n, "payload": n} for n in range(30)])
    keys = queue().keys.shard(0)
    assert r.xlen(keys.events_stream) == 1
    lua.run_many(r, [trim_call(keys, max_age=-60)])  # a cutoff a minute ahead: everything is older
    assert r.xlen(keys.events_stream) == 0


def test_histories_read_through_a_client_of_their_own(r):
    OrdersWorker.perform_async([{"id": "z", "payload": 1}])
    assert [e.kind for e in IdHistories(r, OrdersWorker.keys()).of("z").events] == ["enqueued"]


def test_a_restore_and_a_hand_over_say_what_went_back_and_who_held_it(r):
    from queue_support import restore

    from lowkiq.store import lua
    from lowkiq.store.leases import release_call

    q = queue()
    shard = q.shard_of("a")
    other = next(i for i in (f"b{n}" for n in range(40)) if q.shard_of(i) == shard)
    OrdersWorker.perform_async([{"id": "a", "payload": 1}, {"id": other, "payload": 1}])
    lease = held_lease(q, shard)
    q.ack_and_take(None, (lease, 10), thread="t-1")
    assert restore(q, lease) == 2
    back = history("a").events[0]
    assert (back.kind, back.server, back.thread) == ("restored", "tests", "t-1")
    assert "could not tell" in (back.reason or "")
    q.ack_and_take(None, (lease, 10), thread="t-2")
    lua.run_many(r, [release_call(lease, ["a"])])  # "a" done, the other put back as the shard is handed over
    performed, handed = history("a").events[0], history(other).events[0]
    assert (performed.kind, handed.kind) == ("performed", "restored") and handed.thread == "t-2"
    assert "handed the shard over" in (handed.reason or "")
