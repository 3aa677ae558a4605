"""With the real clock, what is due and when a failed job's next try comes are decided by the Redis
server's clock, as enqueue defaults and leases are: processes on hosts whose clocks disagree agree.
(The tests elsewhere move a clock by hand, which the scripts then take as given.)"""

from __future__ import annotations

import time

import pytest
from queue_support import OrdersWorker, held_lease, queue, queued
from timing_support import Clock

from lowkiq.store import lua


@pytest.fixture
def runtime(configure):
    runtime = configure(workers=[OrdersWorker])
    runtime.clock = time.time
    return runtime


def redis_now(r) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def same_shard_ids(q, n: int) -> list[str]:
    return [i for i in (f"j{k}" for k in range(1000)) if q.shard_of(i) == 0][:n]


def test_the_real_clock_lets_the_scripts_read_redis_s_and_a_hand_moved_one_is_passed_as_given():
    assert lua.now_arg(time.time) == ""
    assert lua.now_arg(Clock(1234.5)) == 1234.5


def test_due_is_decided_by_redis_s_clock_not_by_the_caller_s(runtime, r):
    q = queue(OrdersWorker)
    due, later = same_shard_ids(q, 2)
    now = redis_now(r)
    OrdersWorker.perform_async([{"id": due, "perform_in": now - 1}, {"id": later, "perform_in": now + 30}])
    lease = held_lease(q, 0)
    # What the server sends with the real clock: "now" is left to the script, which reads Redis's TIME.
    reply = lua.run(r, "ack_and_take", lease.keys, ("", 10, lease.grant, 5000, "t"))
    assert reply[1::5] == [due.encode()]  # {head, then id, retry_count, perform_in, error, payloads per job}
    # A caller whose own clock ran a minute ahead would have taken the later job too: the clock matters.
    ahead = lua.run(r, "ack_and_take", lease.keys, (repr(now + 60), 10, lease.grant, 5000, "t"))
    assert ahead[1::5] == [later.encode()]


def test_a_failed_job_s_next_try_counts_from_redis_s_clock(runtime, r, monkeypatch):
    q = queue(OrdersWorker)
    [job_id] = same_shard_ids(q, 1)
    OrdersWorker.perform_async([{"id": job_id}])
    lease = held_lease(q, 0)
    assert [j.id for j in q.ack_and_take(None, (lease, 10)).jobs] == [job_id]  # due at once: pushed at Redis's now
    before = redis_now(r)
    q.fail(lease, [(job_id, time.time() + 30)], b"KeyError: 'x'", 25)
    after = redis_now(r)
    assert before + 30 - 0.5 <= queued(job_id).perform_in <= after + 30 + 0.5
    # Sent as 30 s from now, counted by the script from Redis's TIME, not as a time of this host.
    sent = []
    run = lua.run
    OrdersWorker.perform_async([{"id": job_id, "payload": "v2"}])
    q.client.zadd(lease.keys.ids_by_perform_in_zset, {job_id: 0})  # due again
    assert [j.id for j in q.ack_and_take(None, (lease, 10)).jobs] == [job_id]
    monkeypatch.setattr(lua, "run", lambda client, name, keys, args: sent.append(args) or run(client, name, keys, args))
    q.fail(lease, [(job_id, time.time() + 30)], b"KeyError: 'x'", 25)
    args = sent[0]
    delay = args[args.index(job_id, 7) + 1]  # after the batch's own arguments: (id, its delay, its error)
    assert args[0] == "" and 29 < delay <= 30
