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
from lowkiq import membership
from lowkiq.keeper import Keeper
from lowkiq.processor import Processor

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
    shard, lease = next(iter(keeper.leases.items()))
    threads[keeper.given[shard]].hand_back(lease, release=False)
    keeper.draining = True
    keeper.wire.callers.clear()
    read(threads)
    assert shard not in keeper.leases
    assert r.hget(lease.keys.lease_hash, "state") == b"released"
    assert served(threads) and shard[1] not in {s for s, _ in served(threads)}
    assert keeper.wire.callers == set(), "the keeper's connection is the keeper thread's alone"
