"""Queued ids per group (docs/fairness.md, "Depth and lag per group"): each shard's ``group_lengths`` zset is
moved in the scripts that move ids in and out of a group, and must equal a count of ``group_of`` over the
queued ids after every step an id can take: enqueue, merge, debounce, take, ack, fail, retry, the morgue,
requeue, delete, perform now, restore, a takeover and a refused permit's way back."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from queue_support import acquire, held_lease, queue, restore

import lowkiq
from lowkiq.store import lua
from lowkiq.store.group_metrics import OTHER, GroupMetrics
from lowkiq.store.metrics import FULL, STATS, MetricsReader

T = 1_700_000_000.0


class Tenants(lowkiq.Worker):
    shards_count = 2
    max_retry_count = 2

    def perform(self, payloads_by_id):
        pass


class Whole(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 1
    morgue_policy = "whole_id"
    debounce = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[Tenants, Whole])


def counted(r, worker: type[lowkiq.Worker]) -> Counter[str]:
    """The kept counts, every shard, after checking each against a count of group_of over its queued ids."""
    total: Counter[str] = Counter()
    for keys in queue(worker).keys.shards():
        truth = Counter(g.decode() for g in (r.hget(keys.group_of_hash, i)
                                             for i in r.zrange(keys.ids_by_perform_in_zset, 0, -1)) if g)
        kept = {g.decode(): s for g, s in r.zrange(keys.group_lengths_zset, 0, -1, withscores=True)}
        assert kept == {g: float(n) for g, n in truth.items()}, keys.shard  # no group at 0 or below stays
        total.update(truth)
    return total


def take(worker: type[lowkiq.Worker], shard: int, limit: int = 100, now: float = T) -> list[str]:
    q = queue(worker)
    taken = q.ack_and_take(None, (held_lease(q, shard), limit), now=now)
    assert taken is not None
    return [job.id for job in taken.jobs]


def ack(worker: type[lowkiq.Worker], shard: int, ids: list[str]) -> None:
    q = queue(worker)
    q.ack_and_take((held_lease(q, shard), ids), None, now=T)


def fail(worker: type[lowkiq.Worker], shard: int, ids: list[str], now: float = T) -> None:
    q = queue(worker)
    q.fail(held_lease(q, shard), [(i, now - 1) for i in ids], b"boom", worker.max_retry_count, now=now,
           morgue_policy=worker.morgue_policy)


def fail_round(failing) -> None:
    """Take every due id of each shard: fail those ``failing`` picks, acknowledge the others."""
    for shard in range(2):
        got = take(Tenants, shard)
        fail(Tenants, shard, [i for i in got if failing(i)])
        ack(Tenants, shard, [i for i in got if not failing(i)])


def ids_in(worker: type[lowkiq.Worker], shard: int, ids: list[str]) -> list[str]:
    q = queue(worker)
    return [i for i in ids if q.shard_of(i) == shard]


def test_counts_stay_exact_through_every_way_in_and_out_of_a_group(r, clock):
    ids = [f"a{i}" for i in range(12)] + [f"b{i}" for i in range(5)] + [f"d{i}" for i in range(4)]
    Tenants.perform_async([{"id": i, "group": i[0].upper() if i[0] != "d" else None, "payload": 1,
                            "perform_in": T - 50} for i in ids])
    assert counted(r, Tenants) == {"A": 12, "B": 5}
    # merges keep the queued id's group, whatever the new job says; a second payload counts nothing
    Tenants.perform_async([{"id": "a0", "group": "B", "payload": 2}, {"id": "d0", "group": "A", "payload": 2}])
    assert counted(r, Tenants) == {"A": 12, "B": 5}
    Tenants.perform_async([{"id": "c0", "group": "C", "payload": 1, "perform_in": T - 40}])
    assert counted(r, Tenants) == {"A": 12, "B": 5, "C": 1}

    for shard in range(2):
        taken = take(Tenants, shard, limit=4)
        assert taken
        # while taken, an id is not queued: the copy a new job creates counts again, in the new job's group
        Tenants.perform_async([{"id": taken[0], "group": "N", "payload": 3, "perform_in": T - 30}])
        assert counted(r, Tenants)["N"] == shard + 1
        retried, acked = taken[:2], taken[2:]
        ack(Tenants, shard, acked)
        counted(r, Tenants)
        fail(Tenants, shard, retried)  # back into the queue (the first merges into its new copy)
        counted(r, Tenants)

    # retries to the morgue (oldest payload out, the rest back in the queue), then every queued job of a shard
    for _ in range(Tenants.max_retry_count + 1):
        for shard in range(2):
            failing = ids_in(Tenants, shard, ["a0", "a1", "a2", "b0", "b1", "c0"])
            got = take(Tenants, shard)
            fail(Tenants, shard, [i for i in got if i in failing])
            counted(r, Tenants)
            ack(Tenants, shard, [i for i in got if i not in failing])
            counted(r, Tenants)
    actions = lowkiq.current().actions(Tenants)
    dead = sorted(j.id for j in lowkiq.current().queries(Tenants).morgue("id").rows)
    assert len(dead) == 3  # a0 (its oldest payload; the newer one queued again), a2, b1
    assert actions.morgue_requeue(dead[:2]) == 2
    counted(r, Tenants)
    assert actions.kill(dead[:2]) == 2
    counted(r, Tenants)
    assert actions.morgue_requeue_all() == 3
    counted(r, Tenants)
    queued = sorted(j.id for j in lowkiq.current().queries(Tenants).enqueued("id").rows)
    assert len(queued) == 3 and actions.delete(queued[:2]) == 2
    counted(r, Tenants)
    # retried ids: kill_failed and delete_failed take them out of their groups
    Tenants.perform_async([{"id": f"k{i}", "group": f"K{i % 2}", "perform_in": T - 60} for i in range(8)])
    fail_round(lambda i: i.startswith("k"))
    assert counted(r, Tenants)["K0"] == 4
    assert actions.kill(["k0"]) == 1
    assert actions.kill_failed() == 7
    assert not [g for g in counted(r, Tenants) if g.startswith("K")]
    Tenants.perform_async([{"id": f"k{i}", "group": f"K{i % 2}", "perform_in": T - 60} for i in range(8, 12)])
    fail_round(lambda i: i.startswith("k"))
    assert counted(r, Tenants)["K1"] == 2
    assert actions.delete_failed() == 4
    assert not [g for g in counted(r, Tenants) if g.startswith("K")]
    Tenants.perform_async([{"id": f"z{i}", "group": "Z", "perform_in": T + 3600} for i in range(5)])
    assert counted(r, Tenants)["Z"] == 5
    assert actions.perform_now(["z0"]) == 1 and actions.perform_all_now() == 4
    assert counted(r, Tenants)["Z"] == 5
    assert actions.delete_all() == 5
    assert counted(r, Tenants) == {}
    assert not r.keys("*group_lengths")


def test_restore_takeover_untake_and_the_crash_morgue_count_their_ids_back(r):
    Tenants.perform_async([{"id": f"a{i}", "group": "A", "perform_in": T - 10} for i in range(6)])
    q = queue(Tenants)
    for shard in range(2):
        lease = held_lease(q, shard)
        assert take(Tenants, shard, limit=1)
        assert restore(q, lease) == 1
        assert counted(r, Tenants) == {"A": 6}
        taken = take(Tenants, shard, limit=2)
        assert lua.run(q.client, "untake", lease.keys, (lease.grant, "group", *taken)) == len(taken)
        assert counted(r, Tenants) == {"A": 6}
        taken = take(Tenants, shard, limit=2)
        r.hset(lease.keys.lease_hash, "expires_ms", 0)  # its holder stopped renewing
        acquire(q, shard, "another", ttl=60, crash_limit=5)  # taken over: the batch goes back
        assert counted(r, Tenants) == {"A": 6}
        r.delete(lease.keys.lease_hash)
    for shard in range(2):
        taken = take(Tenants, shard, limit=1)
        r.hset(queue(Tenants).keys.shard(shard).lease_hash, "expires_ms", 0)
        acquire(q, shard, "a third", ttl=60, crash_limit=1)  # its crash limit: the morgue, not the queue
    assert counted(r, Tenants) == {"A": 4}


def test_whole_id_morgue_and_debounce_moves_keep_counts(r):
    Whole.perform_async([{"id": "x", "group": "G", "payload": 1}, {"id": "y", "group": "G", "payload": 1}])
    Whole.perform_async([{"id": "x", "group": "G", "payload": 2}])  # debounce moves x inside its group
    assert counted(r, Whole) == {"G": 2}
    later = time.time() + 3600  # past every debounce (Redis time)
    assert take(Whole, 0, limit=1, now=later) == ["y"]
    Whole.perform_async([{"id": "y", "group": "G", "payload": 9}])  # queued again while it performs
    assert counted(r, Whole) == {"G": 2}
    fail(Whole, 0, ["y"], now=later)  # a retry: back into its queued copy, counted once
    assert counted(r, Whole) == {"G": 2}
    assert sorted(take(Whole, 0, limit=2, now=later)) == ["x", "y"]
    ack(Whole, 0, ["x"])
    Whole.perform_async([{"id": "y", "group": "G", "payload": 10}])
    fail(Whole, 0, ["y"], now=later)  # out of retries, whole_id: its queued copy goes to the morgue with it
    assert counted(r, Whole) == {}
    Whole.perform_async([{"id": "y", "group": "G", "payload": 11}])  # held by the morgue, not queued
    assert counted(r, Whole) == {}
    assert lowkiq.current().actions(Whole).morgue_requeue(["y"]) == 1
    counted(r, Whole)


def read_groups(worker: type[lowkiq.Worker], now: float = T, kind: str = STATS):
    [m], _ = MetricsReader(queue(worker).client).read([worker.keys()], now, kind=kind, groups=True)
    return m


def test_the_read_shows_the_20_biggest_groups_and_sums_the_rest_as_other(r):
    # group g<i> holds i + 1 ids over both shards, its oldest due 100 + i seconds ago
    Tenants.perform_async([{"id": f"g{i}-{k}", "group": f"g{i:02}", "perform_in": T - 100 - i + k}
                           for i in range(25) for k in range(i + 1)])
    Tenants.perform_async([{"id": f"d{k}", "perform_in": T - 1000} for k in range(7)])  # the default group
    Tenants.perform_async([{"id": "later", "group": "g24", "perform_in": T + 50}])
    m = read_groups(Tenants)
    assert [g.name for g in m.groups] == [f"g{i:02}" for i in range(24, 4, -1)] + [OTHER]
    shown = {g.name: g for g in m.groups}
    assert shown["g24"].length == 26 and shown["g05"].length == 6
    assert shown["g24"].lag == pytest.approx(124) and shown["g05"].lag == pytest.approx(105)
    assert shown[OTHER].length == 1 + 2 + 3 + 4 + 5  # exact, whatever each shard listed
    assert shown[OTHER].lag == pytest.approx(104)  # g04's oldest: every shard lists all its groups here
    assert sum(g.length for g in m.groups) == m.length - 7
    # a group with nothing due has no lag; the groups leave with their ids
    actions = lowkiq.current().actions(Tenants)
    actions.delete([f"g{i}-{k}" for i in range(25) for k in range(i + 1)] + [f"d{k}" for k in range(7)])
    assert read_groups(Tenants).groups == (GroupMetrics("g24", 1, 0.0),)
    actions.delete_all()
    assert read_groups(Tenants).groups == ()


def test_a_shard_lists_its_own_biggest_and_the_shown_counts_are_exact(r):
    q = queue(Tenants)
    on = {s: [f"x{n}" for n in range(400) if q.shard_of(f"x{n}") == s] for s in range(2)}
    # shard 0: 21 groups of 3 ids and "late" with 2 (outside its top 20); shard 1: "late" with 5
    jobs = [{"id": on[0][3 * i + k], "group": f"big{i:02}", "perform_in": T - 10} for i in range(21) for k in range(3)]
    jobs += [{"id": on[0][63 + k], "group": "late", "perform_in": T - 500} for k in range(2)]
    jobs += [{"id": on[1][k], "group": "late", "perform_in": T - 20} for k in range(5)]
    Tenants.perform_async(jobs)
    shown = {g.name: g for g in read_groups(Tenants, kind=FULL).groups}
    assert shown["late"].length == 7 and shown["late"].lag == pytest.approx(500)  # both shards read
    assert len(shown) == 21 and shown[OTHER].length == 3 * 21 + 7 - 7 - 3 * 19


def test_workers_without_groups_read_no_groups_and_write_no_group_key(r):
    Tenants.perform_async([{"id": i} for i in range(10)])
    assert read_groups(Tenants).groups == ()
    assert not r.keys("*group*")
