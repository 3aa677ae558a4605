"""lowkiq.testing.drain(): every due job performed in the calling thread through the real Redis scripts,
as a server performs it: retry state, morgue, future jobs left, leases taken and released."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, ClassVar

import pytest
from queue_support import acquire, queries, queued

import lowkiq
from lowkiq.store.codec import shard_of
from lowkiq.store.leases import Held, Lease
from lowkiq.testing import DrainFailed, ShardsHeld, drain


class Orders(lowkiq.Worker):
    shards_count = 3
    batch_size = 2
    max_retry_count = 3
    performed: ClassVar[list[tuple[dict[str, list[Any]], int]]] = []
    instances: ClassVar[set[int]] = set()

    def retry_in(self, retry_count):
        return 30

    def perform(self, payloads_by_id):
        Orders.instances.add(id(self))
        Orders.performed.append((dict(payloads_by_id), threading.get_ident()))
        for job_id, payloads in payloads_by_id.items():
            if "boom" in payloads:
                raise ValueError(f"boom in {job_id}")


class Doomed(lowkiq.Worker):
    """Fails every time and retries at once: its second failure exhausts its retries."""

    shards_count = 1
    max_retry_count = 1
    attempts = 0
    exhausted: ClassVar[list[Any]] = []

    def retry_in(self, retry_count):
        return 0

    def perform(self, payloads_by_id):
        Doomed.attempts += 1
        raise KeyError("gone")

    def retries_exhausted(self, batch):
        Doomed.exhausted.extend(batch)


@pytest.fixture(autouse=True)
def setup(configure):
    Orders.performed = []
    Orders.instances = set()
    Doomed.attempts = 0
    Doomed.exhausted = []
    return configure(workers=[Orders, Doomed])


def performed_ids() -> list[str]:
    return [job_id for batch, _ in Orders.performed for job_id in batch]


def test_every_due_job_is_performed_in_the_calling_thread_and_future_ones_are_left(clock):
    Orders.perform_async([{"id": n, "payload": {"n": n}} for n in range(6)]
                         + [{"id": "later", "perform_in": clock.now + 60}])
    drained = drain(Orders, Orders)  # named twice: drained once
    assert sorted(drained["Orders"]) == ["0", "1", "2", "3", "4", "5"]
    assert drained == {"Orders": performed_ids()}  # in the order performed
    assert drained.failures == []
    assert {ident for _, ident in Orders.performed} == {threading.get_ident()}
    assert len(Orders.instances) == 1  # one instance for every shard's batches, as a server thread has
    assert all(len(batch) <= Orders.batch_size for batch, _ in Orders.performed)
    later = queued("later", Orders)
    assert later is not None and later.retry_count == -1 and later.perform_in == clock.now + 60
    assert all(queued(str(n), Orders) is None for n in range(6))
    assert drain(Orders) == {"Orders": []}
    clock.advance(60)
    assert drain(Orders) == {"Orders": ["later"]}


def test_a_failure_lands_in_its_retry_state_and_the_drain_goes_on(clock):
    Orders.perform_async([{"id": "bad", "payload": "boom"}])
    Orders.perform_async([{"id": f"ok{n}"} for n in range(4)])
    drained = drain(Orders, raise_errors=False)
    [failure] = drained.failures
    # batch_size 2: an id taken with "bad" in its batch fails with it, as on a server
    assert failure.worker == "Orders" and "bad" in failure.ids and len(failure.ids) <= 2 and failure.morgued == []
    assert isinstance(failure.exception, ValueError)
    assert sorted(drained["Orders"]) == sorted({"ok0", "ok1", "ok2", "ok3"} - set(failure.ids))
    for job_id in failure.ids:
        job = queued(job_id, Orders)
        assert job.retry_count == 0 and job.perform_in == clock.now + 30
        assert job.error == "ValueError: boom in bad" and "boom in bad" in job.traceback
    # not due again yet: a second drain leaves it in its retry state
    assert drain(Orders, raise_errors=False) == {"Orders": []}
    assert queued("bad", Orders).retry_count == 0


def test_failures_raise_at_the_end_by_default_with_the_first_exception_as_cause():
    assert shard_of("bad", Orders.shards_count) != shard_of("good", Orders.shards_count)  # two batches
    Orders.perform_async([{"id": "bad", "payload": "boom"}, {"id": "good"}])
    with pytest.raises(DrainFailed, match=r"1 batch failed while draining: Orders ids \['bad'\]: ValueError") as caught:
        drain(Orders)
    assert isinstance(caught.value.__cause__, ValueError)
    assert caught.value.drained == {"Orders": ["good"]}  # performed all the same
    assert queued("good", Orders) is None and queued("bad", Orders).retry_count == 0
    assert isinstance(caught.value, lowkiq.LowkiqError)


def test_retries_exhausted_move_the_job_to_the_morgue():
    Doomed.perform_async([{"id": "x", "payload": "v1", "score": 1}])
    drained = drain(Doomed, raise_errors=False)
    assert Doomed.attempts == 2  # the retry was due at once, and performed in the same drain
    assert drained == {"Doomed": []}
    assert [f.morgued for f in drained.failures] == [[], ["x"]]
    dead = queries(Doomed).morgue_job("x")
    assert dead is not None and dead.payloads == [("v1", 1.0)] and dead.error == "KeyError: 'gone'"
    assert queued("x", Doomed) is None
    assert [job.id for job in Doomed.exhausted] == ["x"]


def test_max_retry_count_zero_sends_the_first_failure_to_the_morgue():
    class NoRetry(lowkiq.Worker):
        shards_count = 1
        max_retry_count = 0
        attempts: ClassVar[list[str]] = []

        def retry_in(self, retry_count):
            return 0  # a retry would be due at once, and performed in the same drain

        def perform(self, payloads_by_id):
            NoRetry.attempts.extend(payloads_by_id)
            raise KeyError("gone")

    NoRetry.perform_async([{"id": "x", "payload": "v1", "score": 1}])
    drained = drain(NoRetry, raise_errors=False)
    assert NoRetry.attempts == ["x"]  # performed once
    assert [f.morgued for f in drained.failures] == [["x"]]
    dead = queries(NoRetry).morgue_job("x")
    assert dead is not None and dead.payloads == [("v1", 1.0)] and dead.error == "KeyError: 'gone'"
    assert queued("x", NoRetry) is None


def test_without_arguments_every_configured_worker_is_drained():
    Orders.perform_async([{"id": 1}])
    Doomed.perform_async([{"id": 2}])
    drained = drain(raise_errors=False)
    assert drained == {"Orders": ["1"], "Doomed": []}
    assert queries(Doomed).morgue_job("2") is not None


def test_jobs_a_perform_enqueues_are_drained_too():
    class Fanout(lowkiq.Worker):
        def perform(self, payloads_by_id):
            for job_id in payloads_by_id:
                if job_id == "root":
                    Orders.perform_async([{"id": "child-1"}, {"id": "child-2"}])

    Fanout.perform_async([{"id": "root"}])
    drained = drain(Fanout, Orders)
    assert drained["Fanout"] == ["root"] and sorted(drained["Orders"]) == ["child-1", "child-2"]


def test_server_middlewares_and_partial_failures_go_as_on_a_server(configure):
    seen = []

    def middleware(worker, batch, call_next):
        seen.append(sorted(batch))
        return call_next()

    class Partial(lowkiq.Worker):
        shards_count = 1
        batch_size = 3

        def perform(self, payloads_by_id):
            raise lowkiq.PartialFailure({"b": RuntimeError("b only")})

    configure(workers=[Partial], server_middlewares=[middleware])
    Partial.perform_async([{"id": "a"}, {"id": "b"}, {"id": "c"}])
    drained = drain(Partial, raise_errors=False)
    assert seen == [["a", "b", "c"]]
    assert drained == {"Partial": ["a", "c"]}
    assert [(f.ids, str(f.exception)) for f in drained.failures] == [(["b"], "1 ids failed: b: RuntimeError")]
    assert queued("a", Partial) is None and queued("b", Partial).retry_count == 0


def test_a_process_isolated_worker_performs_in_the_calling_thread(configure):
    pids = []

    class Isolated(lowkiq.Worker):
        isolation = "process"
        time_limit = 30

        def perform(self, payloads_by_id):
            pids.append((os.getpid(), threading.get_ident(), lowkiq.context().worker))

    configure(workers=[Isolated])
    Isolated.perform_async([{"id": 1}])
    assert drain(Isolated) == {"Isolated": ["1"]}
    assert pids == [(os.getpid(), threading.get_ident(), "Isolated")]


def test_the_leases_are_released_and_a_server_could_take_the_shards_at_once():
    Orders.perform_async([{"id": 1}])
    drain(Orders)
    q = lowkiq.current().queue(Orders)
    for shard in range(Orders.shards_count):
        assert isinstance(acquire(q, shard, "a-server"), Lease)


def test_shards_a_server_holds_are_refused_and_nothing_is_taken():
    q = lowkiq.current().queue(Orders)
    Orders.perform_async([{"id": n} for n in range(6)])
    assert isinstance(acquire(q, 1, "a-server"), Lease)
    with pytest.raises(ShardsHeld, match=r"drain cannot take 1 shards: Orders1 \(held by a-server\)"):
        drain(Orders)
    assert Orders.performed == []
    # the shards it could take were released on the way out
    assert isinstance(acquire(q, 0, "another-server"), Lease)
    assert isinstance(acquire(q, 1, "another-server"), Held)


def test_a_perform_longer_than_the_lease_keeps_its_shard(configure):
    class Slow(lowkiq.Worker):
        shards_count = 1

        def perform(self, payloads_by_id):
            time.sleep(2.5)
            assert not lowkiq.context().lease_lost

    configure(workers=[Slow], lease_ttl=2, heartbeat_interval=0.5, min_perform_budget=0.5)
    Slow.perform_async([{"id": 1}])
    assert drain(Slow) == {"Slow": ["1"]}


def test_on_redis_time_without_a_hand_moved_clock(redis_url, r):
    lowkiq.configure(workers=[Orders], redis_url=redis_url)
    Orders.perform_async([{"id": "now"}, {"id": "soon", "perform_in": time.time() + 60}])
    assert drain(Orders) == {"Orders": ["now"]}
    assert queued("soon", Orders).retry_count == -1


def test_a_paused_queue_is_drained_all_the_same():
    from lowkiq.store import pausing

    assert pausing.pause(lowkiq.current().client, Orders.queue_name, worker="Orders", who="tests", source="tests")
    Orders.perform_async([{"id": 1}])
    assert drain(Orders) == {"Orders": ["1"]}
