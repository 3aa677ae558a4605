"""The keeper and the threads of one server process, driven by hand against a real Redis.

The threads are never started: a thread that does not read its inbox is a thread busy in a long perform,
and the test decides when it reads. So the races of a busy thread with membership changes (a rolling
deploy while performs run long) play out deterministically, many times over.
"""

from __future__ import annotations

import threading
import uuid

import pytest

import lowkiq
from lowkiq.server.keeper import Keeper
from lowkiq.server.processor import Processor
from lowkiq.store import membership

SHARDS = 12
THREADS = 2


class Sharded(lowkiq.Worker):
    shards_count = SHARDS

    def perform(self, payloads_by_id):
        pass


def member(member_id: str) -> membership.Member:
    return membership.Member(id=member_id, host="h", pid=1, threads=THREADS, version="", started_ms=0,
                             state=membership.RUNNING, queues=(("Sharded", SHARDS),), hint=None, stable_name="",
                             shards={}, expires_ms=0, ttl_ms=0)


class Wire:
    """The keeper's wire, remembering which threads used it."""

    def __init__(self, wire) -> None:
        self.wire = wire
        self.callers: set[str] = set()

    def call(self, *args, **kwargs):
        self.callers.add(threading.current_thread().name)
        return self.wire.call(*args, **kwargs)

    def call_many(self, *args, **kwargs):
        self.callers.add(threading.current_thread().name)
        return self.wire.call_many(*args, **kwargs)

    def close(self, **kwargs):
        self.wire.close(**kwargs)


@pytest.fixture
def process(configure):
    """A keeper and its threads; ``process.read()`` lets every thread read its inbox once."""
    runtime = configure(workers=[Sharded], threads_per_node=THREADS)
    made = []

    def make():
        stop = threading.Event()
        threads = [Processor(n, runtime, stop, lambda exc, in_perform: None) for n in range(THREADS)]
        keeper = Keeper(runtime, threads, member_id=uuid.uuid4().hex)
        keeper.wire = Wire(keeper.wire)
        for t in threads:
            t.keeper = keeper
        made.append((keeper, threads))
        return keeper, threads

    yield make
    for keeper, threads in made:
        for t in (*threads, keeper):
            t.wire.close(disconnect=True)


def read(threads) -> None:
    for t in threads:
        t._read_inbox()


def served(threads) -> list[tuple[int, int]]:
    """(shard, thread) of every handler of every thread: each shard must appear once."""
    return sorted((h.shard.index, t.number) for t in threads for h in t.handlers)


@pytest.mark.slow
def test_a_shard_moved_again_while_its_thread_is_busy_ends_on_one_thread_once(process, r):
    for _ in range(30):
        r.flushall()
        keeper, threads = process()
        me = member(keeper.member_id)
        keeper.members = [me]
        keeper.rebalance()
        read(threads)
        keeper.members = [me, member(uuid.uuid4().hex)]
        for _ in range(3):  # the other member takes half; some shards move between this process's threads
            keeper.rebalance()
            read(threads)
        keeper.members = [me]  # it leaves: its shards are acquired for threads that are busy...
        keeper.rebalance()
        keeper.rebalance()  # ...and asked about again at the next beat
        keeper.members = [me, member(uuid.uuid4().hex)]  # another one joins before they read their inboxes
        keeper.rebalance()
        keeper.rebalance()
        read(threads)
        read(threads)
        handlers = served(threads)
        assert len({shard for shard, _ in handlers}) == len(handlers), handlers
        assert {shard for shard, _ in handlers} == {index for _, index in keeper.desired}
        for shard, thread in handlers:
            assert keeper.thread_of[("Sharded", shard)] == thread


def test_a_shard_handed_back_that_the_keeper_no_longer_wants_is_released_on_the_threads_own_connection(
        process, r):
    keeper, threads = process()
    me = member(keeper.member_id)
    keeper.members = [me]
    keeper.rebalance()
    read(threads)
    # A move between threads is asked for; before the busy thread hands the shard back, the process starts
    # draining (SIGTERM): the shard must be released, by the thread, not through the keeper's connection.
    shard, lease = next(iter(keeper.holdings.held().items()))
    threads[keeper.given[shard]].hand_back(lease, release=False)
    keeper.draining = True
    keeper.wire.callers.clear()
    read(threads)
    assert shard not in keeper.holdings.held()
    assert r.hget(lease.keys.lease_hash, "state") == b"released"
    assert served(threads) and shard[1] not in {s for s, _ in served(threads)}
    assert keeper.wire.callers == set(), "the keeper's connection is the keeper thread's alone"


def serving_one_job(process):
    """A process alone serving every shard, and a job queued in a shard of its first thread."""
    keeper, threads = process()
    keeper.members = [member(keeper.member_id)]
    keeper.rebalance()
    read(threads)
    handler = threads[0].handlers[0]
    queue = lowkiq.current().queue(Sharded)
    job_id = next(f"x{i}" for i in range(1000) if queue.shard_of(f"x{i}") == handler.shard.index)
    Sharded.perform_async([{"id": job_id, "payload": "v1"}])
    return keeper, threads, handler, job_id


@pytest.mark.slow
def test_a_shard_moved_to_another_thread_while_its_batch_s_outcome_is_unknown_is_restored_first(process, r):
    """A write's reply was lost (its batch may sit in processing) and the keeper moves the shard to another
    thread: the batch goes back to the queue before the shard leaves, else it would stay in processing
    under a lease this process keeps renewing, and a new version of the same id would overwrite it."""
    keeper, threads, handler, job_id = serving_one_job(process)
    first, shard = threads[0], handler.shard.index
    assert [job.id for job in handler.take(None).jobs] == [job_id]  # in processing; then the reply is lost:
    first.recovering, first.pending = True, None
    keeper.thread_of[("Sharded", shard)] = 1  # the keeper moves the shard to the other thread
    first.hand_back(handler.lease, release=False)
    first.step()
    keys = handler.lease.keys
    assert not r.hexists(keys.processing_hash, job_id)
    assert r.zscore(keys.ids_by_perform_in_zset, job_id) is not None
    threads[1]._read_inbox()
    assert shard in [h.shard.index for h in threads[1].handlers] and shard not in [h.shard.index for h in first.handlers]


def test_a_renewal_that_fails_before_a_suspect_batch_ends_its_claim(process, r, monkeypatch):
    """A batch performed alone (it was in flight when a server died) claims the process; if renewing its
    lease first fails, the claim must end with it, or every other thread would wait for it for ever."""
    import redis

    from lowkiq.store.leases import Lease

    keeper, threads, handler, job_id = serving_one_job(process)
    first = threads[0]
    r.hset(handler.lease.keys.crashes_hash, job_id, 1)  # a server died performing it once
    claims = []
    claim = first.isolation.claim
    monkeypatch.setattr(first.isolation, "claim", lambda *args: claims.append(args) or claim(*args))
    monkeypatch.setattr(Lease, "remaining", lambda lease: 0.0)  # the take's renewal left too little time

    def blip(lease):
        raise redis.ConnectionError("Redis went away")

    monkeypatch.setattr(first, "_renew", blip)
    with pytest.raises(redis.ConnectionError):
        first.step()
    assert claims  # the batch was performed alone...
    assert not first.isolation.claimed_by_other(threads[1].name)  # ...and its claim ended with the failure
