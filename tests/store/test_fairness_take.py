"""Groups in the take step (docs/fairness.md): round robin across groups inside a shard, oldest due first
inside a group, the default group as one more group, and Lowkiq's path unchanged without groups."""

from __future__ import annotations

import pytest
from queue_support import held_lease, queue, queued

import lowkiq

T = 1_700_000_000.0


class OneShard(lowkiq.Worker):
    shards_count = 1
    batch_size = 1

    def perform(self, payloads_by_id):
        pass


class Debounced(lowkiq.Worker):
    shards_count = 1
    debounce = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OneShard, Debounced])


def take_all(limit: int = 1, rounds: int = 10_000, worker: type[lowkiq.Worker] = OneShard) -> list[str]:
    """Ids in the order the take step hands them out, acknowledging each batch with the next take."""
    q = queue(worker)
    lease = held_lease(q, 0)
    order: list[str] = []
    acked: list[str] = []
    for _ in range(rounds):
        taken = q.ack_and_take((lease, acked) if acked else None, (lease, limit))
        assert taken is not None
        acked = [job.id for job in taken.jobs]
        if not acked:
            break
        order += acked
    return order


def test_a_late_group_is_served_at_once_behind_a_big_backlog(clock):
    OneShard.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 100 + i / 1000} for i in range(300)])
    OneShard.perform_async([{"id": f"b{i}", "group": "B", "perform_in": T - 1 + i / 1000} for i in range(5)])
    order = take_all()
    assert sorted(order) == sorted([f"a{i}" for i in range(300)] + [f"b{i}" for i in range(5)])
    # A first (its head is older), then turns alternate while B has due work
    assert order[:10] == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"]
    # oldest due first inside a group
    assert [i for i in order if i.startswith("a")] == [f"a{i}" for i in range(300)]


def test_the_default_group_takes_its_turn_like_any_group(clock):
    OneShard.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 100 + i / 1000} for i in range(200)])
    OneShard.perform_async([{"id": f"d{i}", "perform_in": T - 50 + i / 1000} for i in range(3)])
    order = take_all()
    assert order[:6] == ["a0", "d0", "a1", "d1", "a2", "d2"]
    assert len(order) == 203


def test_a_batch_takes_one_id_per_group_per_turn(clock):
    for group in "ABC":
        OneShard.perform_async([{"id": f"{group}{i}", "group": group, "perform_in": T - 10 + i} for i in range(3)])
    order = take_all(limit=4)
    assert order == ["A0", "B0", "C0", "A1", "B1", "C1", "A2", "B2", "C2"]


def test_future_jobs_of_a_group_wait_and_do_not_block_others(clock):
    OneShard.perform_async([{"id": "later", "group": "A", "perform_in": T + 60}])
    OneShard.perform_async([{"id": f"b{i}", "group": "B", "perform_in": T - 1} for i in range(3)])
    assert sorted(take_all(limit=10)) == ["b0", "b1", "b2"]
    assert queued("later", OneShard).perform_in == T + 60


def test_a_failed_grouped_id_comes_back_into_its_group(clock):
    q = queue(OneShard)
    lease = held_lease(q, 0)
    OneShard.perform_async([{"id": "x", "group": "A", "perform_in": T - 5}, {"id": "y", "group": "B", "perform_in": T - 4}])
    taken = q.ack_and_take(None, (lease, 1))
    assert taken is not None and [j.id for j in taken.jobs] == ["x"]
    q.fail(lease, [("x", T - 10)], b"boom", 5)
    r = q.client
    assert r.hget(lease.keys.group_of_hash, "x") == b"A"
    # x failed with a retry time before y's: its group's turn still comes after B's
    assert take_all(limit=5) == ["y", "x"]
    assert r.exists(lease.keys.groups_zset, lease.keys.group_of_hash, lease.keys.grouped_ids_lex_zset) == 0


def test_a_dead_grouped_id_keeps_its_group_for_its_requeue_and_forgets_it_when_deleted(clock, r):
    # max_retry_count 0: a failure goes straight to the morgue
    q = queue(OneShard)
    lease = held_lease(q, 0)
    group_of = lease.keys.group_of_hash
    OneShard.perform_async([{"id": "x", "group": "A", "perform_in": T - 5}, {"id": "y", "group": "A", "perform_in": T - 4}])
    taken = q.ack_and_take(None, (lease, 1))
    assert taken is not None and [j.id for j in taken.jobs] == ["x"]
    assert q.fail(lease, [("x", T)], b"boom", 0).morgued
    assert r.hget(group_of, "x") == b"A"
    actions = lowkiq.current().actions(OneShard)
    assert actions.morgue_requeue(["x"]) == 1
    # x is back in A (counted in its depth), behind y
    assert r.hget(group_of, "x") == b"A"
    assert r.zscore(lease.keys.group_lengths_zset, "A") == 2
    assert take_all(limit=1) == ["y", "x"]
    OneShard.perform_async([{"id": "w", "group": "A"}])
    taken = q.ack_and_take(None, (lease, 1))
    assert taken is not None and [j.id for j in taken.jobs] == ["w"]
    q.fail(lease, [("w", T)], b"boom", 0)
    assert actions.morgue_delete(["w"]) == 1
    assert not r.hexists(group_of, "w")  # deleted for good: nothing left of it


def test_a_killed_grouped_id_keeps_its_group_for_its_requeue(clock, r):
    q = queue(OneShard)
    lease = held_lease(q, 0)
    OneShard.perform_async([{"id": "x", "group": "A", "perform_in": T - 5}])
    taken = q.ack_and_take(None, (lease, 1))
    assert taken is not None
    q.fail(lease, [("x", T - 1)], b"boom", OneShard.max_retry_count)  # retried: retry_count 0
    actions = lowkiq.current().actions(OneShard)
    assert actions.kill_failed() == 1
    assert r.hget(lease.keys.group_of_hash, "x") == b"A"
    assert actions.morgue_requeue(["x"]) == 1
    assert r.hget(lease.keys.group_of_hash, "x") == b"A"
    assert r.zscore(lease.keys.group_lengths_zset, "A") == 1


def test_merging_keeps_the_queued_group_and_order_of_payloads(clock):
    OneShard.perform_async([{"id": "x", "group": "A", "payload": "v1", "score": 1, "perform_in": T - 5}])
    OneShard.perform_async([{"id": "x", "group": "B", "payload": "v2", "score": 2}])
    q = queue(OneShard)
    assert q.client.hget(q.keys.shard(0).group_of_hash, "x") == b"A"
    job = queued("x", OneShard)
    assert job.payloads == [("v1", 1.0), ("v2", 2.0)]
    assert job.perform_in == T - 5


def test_operators_moving_jobs_keep_the_indexes_in_step(clock):
    OneShard.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T + 100 + i} for i in range(3)])
    OneShard.perform_async([{"id": "b", "group": "B", "perform_in": T + 50}])
    lowkiq.current().actions(OneShard).perform_all_now()
    assert sorted(take_all(limit=10)) == ["a0", "a1", "a2", "b"]


def test_without_groups_no_fairness_key_is_written(clock, r):
    OneShard.perform_async([{"id": i} for i in range(20)])
    assert take_all(limit=3) == sorted(str(i) for i in range(20))  # one score (the test clock): by id
    assert not [k for k in r.keys("*") if any(part in k for part in (b":group", b":first_enqueued"))]


@pytest.mark.parametrize("bad, error", [
    (7, TypeError), ("", ValueError), (b"A", TypeError), ("a\nb", ValueError), ("x" * 201, ValueError),
    ("(other)", ValueError),
])
def test_a_bad_group_is_refused_naming_it_and_nothing_is_written(bad, error, r):
    with pytest.raises(error, match="group"):
        OneShard.perform_async([{"id": 1, "group": "fine"}, {"id": 2, "group": bad}])
    assert r.dbsize() == 0 or not r.exists(queue(OneShard).keys.shard(0).payloads_hash)


def test_none_means_the_default_group(clock, r):
    OneShard.perform_async([{"id": 1, "group": None}])
    assert not r.exists(queue(OneShard).keys.shard(0).group_of_hash)


def test_debounce_pushes_a_not_started_id_to_the_end_of_the_burst(clock, r):
    # The Redis server's clock decides: read it the way the push script does.
    Debounced.perform_async([{"id": "x", "payload": 1}])
    first = queued("x", Debounced).perform_in
    seconds, micros = r.time()
    assert first >= seconds + micros / 1e6 + 4.9
    Debounced.perform_async([{"id": "x", "payload": 2}])
    second = queued("x", Debounced).perform_in
    assert second >= first
    # never later than debounce_max (10 x 5 s) after the oldest queued payload's enqueue
    q = queue(Debounced)
    keys = q.keys.shard(0)
    started = float(r.hget(keys.first_enqueued_hash, "x"))
    r.hset(keys.first_enqueued_hash, "x", repr(started - 49))
    Debounced.perform_async([{"id": "x", "payload": 3}])
    assert queued("x", Debounced).perform_in == pytest.approx(max(second, started + 1), abs=1e-3)


def test_debounce_leaves_a_retry_time_alone(clock, r):
    q = queue(Debounced)
    lease = held_lease(q, 0)
    Debounced.perform_async([{"id": "x", "payload": 1, "perform_in": 0}])
    q.client.zadd(lease.keys.ids_by_perform_in_zset, {"x": 0})  # due now whatever debounce said
    taken = q.ack_and_take(None, (lease, 1), now=T)
    assert taken is not None and [j.id for j in taken.jobs] == ["x"]
    q.fail(lease, [("x", T + 1000)], b"boom", 5, now=T)
    Debounced.perform_async([{"id": "x", "payload": 2}])
    assert queued("x", Debounced).perform_in == T + 1000


@pytest.mark.parametrize("attr, value, error", [
    ("priority", "high", TypeError), ("priority", 1.5, TypeError), ("debounce", -1, ValueError),
    ("debounce", "5", TypeError), ("debounce_max", 3, ValueError),
])
def test_a_bad_fairness_attribute_is_refused_naming_it(attr, value, error):
    with pytest.raises(error, match=attr):
        type("Bad", (lowkiq.Worker,), {attr: value})


def test_debounce_max_below_debounce_is_refused():
    with pytest.raises(ValueError, match="debounce_max"):
        type("Bad", (lowkiq.Worker,), {"debounce": 5, "debounce_max": 2})


@pytest.mark.parametrize("attr, value, error", [
    ("group_concurrency", 0, ValueError), ("group_concurrency", -1, ValueError), ("group_concurrency", 1.5, TypeError),
    ("group_concurrency", True, TypeError), ("group_concurrency", "2", TypeError),
    ("group_rate_limit", 5, TypeError), ("group_rate_limit", (5,), TypeError), ("group_rate_limit", [5, 2], TypeError),
    ("group_rate_limit", (0, 2), ValueError), ("group_rate_limit", (2.5, 2), TypeError),
    ("group_rate_limit", (5, 0), ValueError), ("group_rate_limit", (5, float("inf")), ValueError),
    ("group_rate_limit", (5, "2"), TypeError),
])
def test_a_bad_group_limit_is_refused_naming_it(attr, value, error):
    with pytest.raises(error, match=attr):
        type("Bad", (lowkiq.Worker,), {attr: value})


def test_good_group_limits_are_accepted():
    worker = type("Limited", (lowkiq.Worker,), {"group_concurrency": 2, "group_rate_limit": (5, 2)})
    assert worker.group_concurrency == 2 and worker.group_rate_limit == (5, 2)
