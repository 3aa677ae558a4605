"""Group limits in Redis (docs/fairness.md, "Group limits"): permits and starts in the group's own slot, the take
passing over groups at their limit, refused ids going back untouched, and permits ending on ack, fail and expiry."""

from __future__ import annotations

import threading
import time

import pytest
from queue_support import held_lease, queue

import lowkiq
from lowkiq.server import group_limits
from lowkiq.server.shard_handler import ShardHandler
from lowkiq.store import lua, permits
from lowkiq.store.keys import GroupKeys


class Limited(lowkiq.Worker):
    shards_count = 2
    batch_size = 4
    group_concurrency = 1
    max_retry_count = 5

    def perform(self, payloads_by_id):
        pass


class OneShardLimited(lowkiq.Worker):
    shards_count = 1
    group_concurrency = 1

    def perform(self, payloads_by_id):
        pass


class Throttled(lowkiq.Worker):
    shards_count = 1
    batch_size = 10
    group_rate_limit = (3, 0.5)

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    group_limits._blocked.clear()
    group_limits._held.clear()
    return configure(workers=[Limited, Throttled, OneShardLimited])


def ask(r, group: GroupKeys, members, *, concurrency=0, count=0, period_ms=0, ttl_ms=5000) -> permits.Granted:
    limits = permits.Limits(concurrency, count, period_ms)
    return permits.granted(lua.run(r, *permits.take_call(group, limits, ttl_ms, members)))


def holders(r, group: GroupKeys) -> list[str]:
    return [m.decode() for m in r.zrange(group.permits_zset, 0, -1)]


def test_permits_are_granted_in_order_up_to_the_limit_and_end_when_released(r):
    g = GroupKeys("q", "acct-7")
    answer = ask(r, g, ["a", "b", "c"], concurrency=2)
    assert answer.count == 2 and 4.5 < answer.wait <= 5.0  # may free at the earliest holder's end, at the latest
    assert holders(r, g) == ["a", "b"]
    assert ask(r, g, ["c"], concurrency=2).count == 0
    assert lua.run(r, *permits.release_call(g, ["a"])) == 1
    assert ask(r, g, ["c"], concurrency=2).count == 1
    assert sorted(holders(r, g)) == ["b", "c"]
    # the group's keys share one hash tag, whatever the group's name holds
    weird = GroupKeys("q", "a}b{c")
    assert len({key[key.index("{"):key.index("}") + 1] for key in weird.all()}) == 1


def test_a_dead_holders_permit_ends_with_its_lease_and_is_purged_when_a_permit_is_asked(r):
    g = GroupKeys("q", "A")
    assert ask(r, g, ["dead"], concurrency=1, ttl_ms=100).count == 1
    assert ask(r, g, ["other"], concurrency=1).count == 0
    time.sleep(0.15)  # nobody extended it: its holder's lease ran out too
    assert ask(r, g, ["other"], concurrency=1).count == 1
    assert holders(r, g) == ["other"]


def test_extending_moves_a_live_permit_and_never_revives_an_ended_one(r):
    g = GroupKeys("q", "A")
    assert ask(r, g, ["live"], concurrency=2, ttl_ms=200).count == 1
    before = r.zscore(g.permits_zset, "live")
    assert lua.run(r, *permits.extend_call(g, 10_000, ["live", "gone"])) == 1
    assert r.zscore(g.permits_zset, "live") > before + 9000
    assert r.zscore(g.permits_zset, "gone") is None
    assert r.pttl(g.permits_zset) > 9000


def test_no_permit_is_granted_twice_under_concurrent_asks(r, redis_url):
    g = GroupKeys("q", "A")
    results: list[int] = []
    lock = threading.Lock()

    def asker(n: int) -> None:
        import redis as redis_py
        client = redis_py.Redis.from_url(redis_url)
        for i in range(50):
            got = ask(client, g, [f"{n}:{i}"], concurrency=3).count
            with lock:
                results.append(got)
        client.close()

    threads = [threading.Thread(target=asker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 3 and len(holders(r, g)) == 3


@pytest.mark.slow
def test_a_rate_limit_holds_count_starts_per_sliding_period(r):
    g = GroupKeys("q", "A")
    first = ask(r, g, ["a", "b", "c", "d"], count=3, period_ms=400)
    assert first.count == 3 and 0.3 < first.wait <= 0.401
    assert ask(r, g, ["d"], count=3, period_ms=400).count == 0
    assert r.zcard(g.starts_zset) == 3  # bounded by count
    time.sleep(first.wait + 0.01)
    assert ask(r, g, ["d", "e", "f", "g"], count=3, period_ms=400).count == 3
    assert r.zcard(g.starts_zset) == 3


def test_the_take_passes_over_groups_at_their_limit_and_names_each_ids_group(clock):
    q = queue(OneShardLimited)
    OneShardLimited.perform_async([{"id": i, "group": "A", "perform_in": 0} for i in ("a1", "a2")] +
                                  [{"id": "b1", "group": "B", "perform_in": 0}, {"id": "n1", "perform_in": 0}])
    lease = held_lease(q, 0)
    taken = q.ack_and_take(None, (lease, 10), blocked=["A"])
    assert taken is not None
    assert sorted(j.id for j in taken.jobs) == ["b1", "n1"]
    assert taken.groups == ["B" if j.id == "b1" else "" for j in taken.jobs]
    assert taken.next_perform_in is None  # only A is left, and it is passed over: the server says when
    # A's ids stayed queued in their place, and the next take without the block serves them, oldest first
    again = q.ack_and_take((lease, [j.id for j in taken.jobs]), (lease, 10), blocked=[])
    assert [j.id for j in again.jobs] == ["a1", "a2"]
    # Lowkiq's shape: without limits, the reply carries no groups
    assert q.ack_and_take((lease, [j.id for j in again.jobs]), (lease, 10)).groups is None


def handler(runtime, worker, shard: int) -> ShardHandler:
    q = runtime.queue(worker)
    return ShardHandler(held_lease(q, shard), worker(), q, runtime.settings, lua.Wire(runtime.client),
                        clock=runtime.clock)


def ids_in(q, shard: int) -> tuple[list[str], list[str]]:
    keys = q.keys.shard(shard)
    r = q.client
    return ([m.decode() for m in r.zrange(keys.ids_by_perform_in_zset, 0, -1)],
            [m.decode() for m in r.hkeys(keys.processing_hash)])


def two_ids_in_two_shards(q) -> tuple[str, str]:
    by_shard: dict[int, str] = {}
    n = 0
    while len(by_shard) < 2:
        by_shard.setdefault(q.shard_of(f"x{n}"), f"x{n}")
        n += 1
    return by_shard[0], by_shard[1]


def test_a_refused_id_goes_back_untouched_and_its_group_waits_until_the_permit_is_released_on_ack(configure):
    runtime = lowkiq.current()
    q = runtime.queue(Limited)
    first, second = two_ids_in_two_shards(q)
    Limited.perform_async([{"id": first, "group": "A", "perform_in": 0}, {"id": second, "group": "A", "perform_in": 0},
                           {"id": "other", "group": "B", "perform_in": 0}])
    h0, h1 = handler(runtime, Limited, 0), handler(runtime, Limited, 1)
    g = GroupKeys(Limited.queue_name, "A")
    t0 = h0.take(None)
    assert [j.id for j in t0.jobs if j.id in (first, second)] == [first]
    assert len(holders(runtime.client, g)) == 1
    queued_before = q.client.zscore(q.keys.shard(1).ids_by_perform_in_zset, second)
    t1 = h1.take(None)
    assert second not in [j.id for j in t1.jobs]  # A is at its limit on another shard
    assert second in ids_in(q, 1)[0] and second not in ids_in(q, 1)[1]
    assert q.client.zscore(q.keys.shard(1).ids_by_perform_in_zset, second) == queued_before  # its place kept
    back, taken = runtime.histories(Limited).of(second).events[:2]  # its history says why it did not start
    assert (taken.kind, back.kind) == ("taken", "restored") and "its group was at its limit" in (back.reason or "")
    assert "other" not in [j.id for j in t1.jobs] or q.shard_of("other") == 1
    # A is passed over by the next takes until a permit may free; then the ack of the first id ends its permit
    assert group_limits.blocked_for(Limited.queue_name).groups(time.monotonic())[0] == ["A"]
    ack = h0.perform(t0)
    h0.take(ack)
    assert holders(runtime.client, g) == []
    time.sleep(group_limits.RECHECK + 0.01)
    t1 = h1.take(None)
    assert second in [j.id for j in t1.jobs]
    assert len(holders(runtime.client, g)) == 1


def test_a_failed_batch_releases_its_permits(configure):
    runtime = lowkiq.current()
    q = runtime.queue(Limited)
    first, _ = two_ids_in_two_shards(q)
    Limited.perform_async([{"id": first, "group": "A", "perform_in": 0}])
    h0 = handler(runtime, Limited, 0)
    g = GroupKeys(Limited.queue_name, "A")
    taken = h0.take(None)
    assert [j.id for j in taken.jobs] == [first] and len(holders(runtime.client, g)) == 1
    h0.fail(taken, RuntimeError("boom"), 0.1)
    assert holders(runtime.client, g) == []
    assert q.client.zscore(q.keys.shard(0).ids_by_retry_count_zset, first) == 0


def test_the_keeper_side_extension_moves_a_batchs_permits_with_its_lease(configure):
    runtime = lowkiq.current()
    q = runtime.queue(Limited)
    first, _ = two_ids_in_two_shards(q)
    Limited.perform_async([{"id": first, "group": "A", "perform_in": 0}])
    h0 = handler(runtime, Limited, 0)
    g = GroupKeys(Limited.queue_name, "A")
    h0.take(None)
    member = holders(runtime.client, g)[0]
    runtime.client.zadd(g.permits_zset, {member: 1})  # as if about to end
    group_limits.extend(lua.Wire(runtime.client), [h0.lease])
    assert runtime.client.zscore(g.permits_zset, member) > 1_000_000


@pytest.mark.slow
def test_a_rate_limited_group_waits_in_order_while_another_group_goes(configure):
    runtime = lowkiq.current()
    Throttled.perform_async([{"id": f"a{i}", "group": "A", "perform_in": i} for i in range(5)] +
                            [{"id": f"b{i}", "group": "B", "perform_in": 10 + i} for i in range(5)])
    h = handler(runtime, Throttled, 0)
    got: list[str] = []
    ack = None
    for _ in range(4):
        taken = h.take(ack)
        got += [j.id for j in taken.jobs]
        ack = h.perform(taken) if taken.jobs else None
    assert [i for i in got if i.startswith("a")] == ["a0", "a1", "a2"]
    assert [i for i in got if i.startswith("b")] == ["b0", "b1", "b2"]  # B has its own window
    assert taken.next_perform_in is not None  # the shard says when the throttled groups may go again
    time.sleep(0.55)
    for _ in range(3):
        taken = h.take(ack)
        got += [j.id for j in taken.jobs]
        ack = h.perform(taken) if taken.jobs else None
    assert [i for i in got if i.startswith("a")] == ["a0", "a1", "a2", "a3", "a4"]
