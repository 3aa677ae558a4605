"""The lease scripts on a real Redis: every fenced script refuses a wrong grant and an expired lease,
acquire hands over only expired leases (restoring their batch), and the job that vanished no longer can."""

from __future__ import annotations

import time

import pytest
from queue_support import OrdersWorker, acquire, queries, queue, queued, restore

import lowkiq
from lowkiq.store import lua, membership
from lowkiq.store.leases import Held, Lease, LeaseRefused, new_grant


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def ids_in(shard: int, n: int) -> list[str]:
    return [str(i) for i in range(500) if queue().shard_of(str(i)) == shard][:n]


def grab(member: str, shard: int = 0, ttl: float = 60) -> Lease:
    got = acquire(queue(), shard, member, ttl=ttl)
    assert isinstance(got, Lease), got
    return got


def stale(lease: Lease) -> Lease:
    """The same shard's lease with a grant Redis never gave."""
    return Lease(lease.shard, lease.keys, new_grant(), lease.epoch, lease.cfg_epoch, lease.ttl, lease.renewed_at)


def expire(lease: Lease) -> None:
    queue().client.hset(lease.keys.lease_hash, "expires_ms", 1)


def refused(call, reason: str) -> LeaseRefused:
    with pytest.raises(LeaseRefused) as caught:
        call()
    assert caught.value.reason == reason
    assert caught.value.lease_key.endswith(":lease")
    return caught.value


def test_acquire_grants_a_free_shard_and_refuses_a_held_one(r):
    a = grab("A")
    assert (a.epoch, a.cfg_epoch, a.restored) == (1, 0, 0)
    held = acquire(queue(), 0, "B", ttl=60)
    assert isinstance(held, Held) and held.owner == "A" and 0 < held.ms_left <= 60_000
    lease = r.hgetall(a.keys.lease_hash)
    assert (lease[b"state"], lease[b"owner"], lease[b"grant"]) == (b"held", b"A", a.grant.encode())


@pytest.mark.parametrize("script", ["ack_and_take", "fail", "restore", "renew", "release"])
def test_every_fenced_script_refuses_a_wrong_grant_and_an_expired_lease(script, r):
    ids = ids_in(0, 2)
    OrdersWorker.perform_async([{"id": i} for i in ids])
    a = grab("A")
    q = queue()
    q.ack_and_take(None, (a, 1))
    calls = {
        "ack_and_take": lambda lease: q.ack_and_take(None, (lease, 1)),
        "fail": lambda lease: q.fail(lease, [(ids[0], 0.0)], b"boom", 5),
        "restore": lambda lease: restore(q, lease),
        "renew": lambda lease: lua.run(q.client, "renew", lease.keys, (lease.grant, 1000)),
        "release": lambda lease: lua.run(q.client, "release", lease.keys, (lease.grant,)),
    }
    before = _state(r)
    refused(lambda: _raise_refusal(calls[script], stale(a)), "FENCED")
    assert _state(r) == before  # a refused call changed nothing
    expire(a)
    before = _state(r)
    refused(lambda: _raise_refusal(calls[script], a), "LEASE_EXPIRED")
    assert _state(r) == before


def _raise_refusal(call, lease):
    import redis

    from lowkiq.store.leases import refusal

    try:
        return call(lease)
    except redis.ResponseError as exc:
        raise (refusal(exc) or exc) from None


def _state(r) -> dict:
    from queue_support import snapshot

    return snapshot(r)


def test_the_job_that_vanished_now_ends_queued_for_retry(clock):
    """A takes x; A's lease expires; B takes over (restoring x) and takes x; A acks x: refused;
    B's perform fails: x is queued with retry_count 0, not lost."""
    (x,) = ids_in(0, 1)
    OrdersWorker.perform_async([{"id": x, "payload": "v1"}])
    q = queue()
    a = grab("A")
    assert [j.id for j in q.ack_and_take(None, (a, 1)).jobs] == [x]
    expire(a)
    b = grab("B")
    assert (b.epoch, b.restored) == (2, 1)
    assert [j.id for j in q.ack_and_take(None, (b, 1)).jobs] == [x]
    refused(lambda: q.ack_and_take((a, [x]), None), "FENCED")
    assert [j.id for j in queries().busy()] == [x]  # B's record survived A's stale ack
    failed = q.fail(b, [(x, clock.now + 10)], b"boom", 5)
    assert failed.missing == [] and failed.morgued == []
    job = queued(x)
    assert (job.retry_count, job.error, [p for p, _ in job.payloads]) == (0, "boom", ["v1"])


def test_fail_reports_ids_missing_from_processing_instead_of_skipping_them(clock):
    (x,) = ids_in(1, 1)
    a = grab("A", shard=1)
    failed = queue().fail(a, [(x, clock.now)], b"boom", 5)
    assert failed.missing == [x]


def test_acquire_after_expiry_restores_the_batch_and_counts_a_crash_per_job(r, clock):
    ids = ids_in(0, 2)
    OrdersWorker.perform_async([{"id": i, "payload": i} for i in ids])
    q = queue()
    lease = grab("A")
    for attempt, member in enumerate(["B", "C", "D"], start=1):
        taken = q.ack_and_take(None, (lease, 10))
        assert sorted(j.id for j in taken.jobs) == sorted(ids)
        expire(lease)
        lease = grab(member)
        if attempt < 3:
            assert (lease.restored, lease.morgued) == (2, [])
            assert {k.decode(): int(v) for k, v in r.hgetall(lease.keys.crashes_hash).items()} == {i: attempt for i in ids}
    # the third time in a row their owner died performing them: the morgue, all payloads, a clear error
    assert (lease.restored, sorted(lease.morgued)) == (0, sorted(ids))
    for i in ids:
        dead = queries().morgue_job(i)
        assert "died while performing this job" in dead.error and [p for p, _ in dead.payloads] == [i]
    assert r.exists(lease.keys.crashes_hash) == 0


def test_a_successful_ack_or_a_normal_failure_clears_the_crash_count(r, clock):
    ids = ids_in(0, 2)
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    lease = grab("A")
    assert not q.ack_and_take(None, (lease, 10)).suspect
    expire(lease)
    lease = grab("B")
    assert r.hlen(lease.keys.crashes_hash) == 2
    taken = q.ack_and_take(None, (lease, 1))
    assert taken.suspect and len(taken.jobs) == 1  # in flight at a crash: its server performs it alone
    q.ack_and_take((lease, [taken.jobs[0].id]), None)
    next_one = q.ack_and_take(None, (lease, 1))
    assert next_one.suspect
    other = next_one.jobs[0].id
    q.fail(lease, [(other, clock.now + 60)], b"boom", 5)
    assert r.exists(lease.keys.crashes_hash) == 0
    OrdersWorker.perform_async([{"id": ids[0], "payload": "again"}])
    again = q.ack_and_take(None, (lease, 10))
    assert [j.id for j in again.jobs] == [ids[0]] and not again.suspect


def test_release_acknowledges_puts_back_the_rest_and_hands_over_without_a_restore(r):
    ids = ids_in(2, 3)
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    a = grab("A", shard=2)
    taken = [j.id for j in q.ack_and_take(None, (a, 3)).jobs]
    from lowkiq.server.holdings import Holdings
    from lowkiq.store.lua import Wire

    wire = Wire(q.client)
    assert Holdings(lowkiq.current(), "A").release(wire, [a], {id(a): taken[:2]}) == 1  # two acknowledged, one put back
    wire.close()
    assert r.hget(a.keys.lease_hash, "state") == b"released"
    assert int(r.hget(a.keys.counters_hash, "processed")) == 2
    assert queued(taken[2]) is not None and queries().busy() == []
    b = grab("B", shard=2)
    assert (b.epoch, b.restored) == (2, 0)
    assert r.exists(b.keys.crashes_hash) == 0  # a handover is not a crash


def test_acquire_of_an_unleased_shard_with_a_batch_left_restores_it_without_counting_a_crash(r):
    """What a server without leases left behind when it stopped mid-batch."""
    (x,) = ids_in(1, 1)
    OrdersWorker.perform_async([{"id": x}])
    q = queue()
    lease = grab("old", shard=1)
    q.ack_and_take(None, (lease, 1))
    r.delete(lease.keys.lease_hash)
    fresh = grab("new", shard=1)
    assert fresh.restored == 1 and r.exists(fresh.keys.crashes_hash) == 0


def test_ack_and_take_renews_the_lease_it_takes_under(r):
    a = grab("A", ttl=2)
    r.hset(a.keys.lease_hash, "expires_ms", int(r.hget(a.keys.lease_hash, "expires_ms")) - 1500)
    queue().ack_and_take(None, (a, 1), thread="lowkiq-3")
    seconds, micros = r.time()
    left = int(r.hget(a.keys.lease_hash, "expires_ms")) - (seconds * 1000 + micros // 1000)
    assert 1500 < left <= 2000


def test_membership_heartbeats_list_the_live_members_and_drop_the_expired(r):
    def beat(member: str, ttl_ms: int):
        record = membership.info(threads=2, version=lowkiq.__version__, state="running", started_ms=1,
                                 queues=[("orders", 3)], hint=None, stable_name="", shards={"orders": [0]},
                                 ttl_ms=ttl_ms)
        return membership.members_of(lua.run(r, *membership.beat_call(member, ttl_ms, record)))[1]

    assert [m.id for m in beat("A", 100)] == ["A"]
    assert sorted(m.id for m in beat("B", 60_000)) == ["A", "B"]
    time.sleep(0.15)
    live = beat("B", 60_000)
    assert [m.id for m in live] == ["B"]
    assert live[0].shards == {"orders": (0,)} and live[0].threads == 2
    assert [m.id for m in membership.live(r)] == ["B"]
    lua.run(r, *membership.leave_call("B"))
    assert membership.live(r) == []


def test_lease_lost_asks_redis_only_past_the_local_deadline(r):
    from lowkiq.job_context import Context
    from lowkiq.store.leases import verify

    client = queue().client
    asked: list[str] = []

    def check(lease: Lease):
        asked.append(lease.grant)
        return verify(client, lease)

    a = grab("A", ttl=30)
    a.check = check
    context = Context("OrdersWorker", 0, a)
    assert context.lease_lost is False and asked == []  # fresh: no round trip
    a.renewed_at -= 60  # no renewal for a minute, as after a pause: Redis still says it is A's
    assert context.lease_lost is False and len(asked) == 1
    assert context.lease_remaining() > 25  # what Redis said is left counts as a renewal
    a.renewed_at -= 60
    expire(a)  # expired in Redis, nobody took it yet: the fenced writes would be refused already
    assert context.lease_lost is True and len(asked) == 2
    b = grab("B")  # taken over
    assert context.lease_lost is True and len(asked) == 3
    assert verify(client, a) == "FENCED" and verify(client, b) is None
