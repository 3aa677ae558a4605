"""A perform_async that Redis stops answering, or whose connection is lost, part way raises
lowkiq.PartialEnqueue: every job is in exactly one of written / not_written / uncertain, and
what Redis holds agrees (each written job is queued, no job not written is)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis_server import RedisServer

import lowkiq

# The producer's socket timeout (pool_timeout): a few times the longest wait for Redis to read more of a
# large call here (Redis reads a pipeline as fast as it runs it; the system wakes a sender in MB steps).
TIMEOUT = 2.0


class Bulk(lowkiq.Worker):
    shards_count = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def admin(own_redis: RedisServer) -> Iterator[redis.Redis]:
    """A client of the test's own, to interfere with the producer's calls."""
    client = redis.Redis.from_url(own_redis.url, socket_timeout=10)
    yield client
    client.close()


@pytest.fixture
def producer(own_redis: RedisServer) -> Iterator[None]:
    lowkiq.configure(workers=[Bulk], redis_url=own_redis.url, pool_timeout=TIMEOUT)
    Bulk.perform_async([{"id": "warm-up"}])  # registered and connected: the calls below are pushes only
    yield
    lowkiq.runtime._current = None


def jobs(count: int, size: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"j{i}", "payload": f"{i:0{size}}"} for i in range(count)]


def queued(client: redis.Redis) -> set[str]:
    pipe = client.pipeline(transaction=False)
    for shard in Bulk.keys().shards():
        pipe.zrange(shard.ids_lex_zset, 0, -1)
    return {job_id.decode() for ids in pipe.execute() for job_id in ids} - {"warm-up"}


def enqueue_in_background(batch: list[dict[str, Any]]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            outcome["count"] = Bulk.perform_async(batch)
        except Exception as exc:
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def when_part_is_queued(client: redis.Redis, minimum: int, interrupt: Callable[[], None]) -> None:
    """Once Redis holds ``minimum`` jobs of the call in flight, ``interrupt`` it."""
    deadline = time.monotonic() + 30
    while sum(client.zcard(shard.ids_lex_zset) for shard in Bulk.keys().shards()) < minimum:
        assert time.monotonic() < deadline, "the producer wrote nothing in 30 s"
        time.sleep(0.005)
    interrupt()


def check_agrees(exc: lowkiq.PartialEnqueue, batch: list[dict[str, Any]], stored: set[str]) -> None:
    """The three lists cover every position once, and Redis holds every written job and no job not written."""
    positions = exc.written + exc.not_written + exc.uncertain
    assert sorted(positions) == list(range(len(batch)))
    ids = [job["id"] for job in batch]
    assert {ids[i] for i in exc.written} <= stored
    assert not {ids[i] for i in exc.not_written} & stored
    assert stored <= {ids[i] for i in exc.written + exc.uncertain}


@pytest.mark.slow
def test_a_redis_that_stops_answering_mid_call_names_the_written_the_unsent_and_the_uncertain(
        own_redis, admin, producer):
    # Far more than the sockets' buffers hold: the producer is still sending when Redis stops.
    batch = jobs(60_000, size=500)
    assert own_redis.process is not None
    pid = own_redis.process.pid
    thread, outcome = enqueue_in_background(batch)
    try:
        when_part_is_queued(admin, 2000, lambda: os.kill(pid, signal.SIGSTOP))
        thread.join(TIMEOUT * 5)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not thread.is_alive()
    exc = outcome.get("error")
    assert isinstance(exc, lowkiq.PartialEnqueue), outcome
    assert isinstance(exc.cause, redis.TimeoutError), exc.cause
    assert outcome["seconds"] < 20
    # The replies read before Redis stopped, the scripts sent whole without a reply, the rest never sent.
    assert exc.written and exc.uncertain and exc.not_written
    assert f"wrote {len(exc.written):,} of 60,000 jobs" in str(exc) and "may or may not have been" in str(exc)
    thread.join()
    check_agrees(exc, batch, queued(admin))

    # Enqueueing again what was not known to be written completes the call.
    Bulk.perform_async([batch[i] for i in exc.not_written + exc.uncertain])
    assert len(queued(admin)) == len(batch)


@pytest.mark.slow
def test_a_connection_reset_mid_call_names_what_was_written(own_redis, admin, producer):
    batch = jobs(60_000, size=500)
    thread, outcome = enqueue_in_background(batch)
    # Every client but this one: the producer's connection, closed by Redis between two of its scripts.
    when_part_is_queued(admin, 2000, lambda: admin.client_kill_filter(_type="normal", skipme=True))
    thread.join(TIMEOUT * 5)
    assert not thread.is_alive()
    exc = outcome.get("error")
    assert isinstance(exc, lowkiq.PartialEnqueue), outcome
    assert isinstance(exc.cause, redis.ConnectionError), exc.cause
    assert exc.not_written and exc.written + exc.uncertain
    check_agrees(exc, batch, queued(admin))


@pytest.mark.slow
@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable_enqueue"])
def test_a_lost_reply_is_uncertain_not_a_bare_timeout(own_redis, admin, durable):
    """One slice whose reply never came: it may have been written, and the error says so."""
    lowkiq.configure(workers=[Bulk], redis_url=own_redis.url, pool_timeout=TIMEOUT, durable_enqueue=durable,
                     replica_wait=0.1)
    try:
        with contextlib.suppress(lowkiq.NotDurable):  # written; no replica here to confirm it
            Bulk.perform_async([{"id": "warm-up"}])
        admin.execute_command("CLIENT", "PAUSE", int(TIMEOUT * 2500), "WRITE")
        started = time.monotonic()
        with pytest.raises(lowkiq.PartialEnqueue) as caught:
            Bulk.perform_async([{"id": "a"}, {"id": "b"}])
        assert time.monotonic() - started < TIMEOUT * 2.5
        assert (caught.value.written, caught.value.not_written, caught.value.uncertain) == ([], [], [0, 1])
        assert isinstance(caught.value.cause, redis.TimeoutError)
        # Still what code that caught Redis's errors around perform_async catches.
        assert isinstance(caught.value, redis.RedisError)
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        lowkiq.runtime._current = None


def test_an_error_reply_for_one_shard_is_a_partial_enqueue_and_for_every_shard_redis_s_own(r, configure):
    configure(workers=[Bulk])
    batch = jobs(50)
    broken = Bulk.keys().shard(0)
    # The push script reads this sorted set before any write: its WRONGTYPE leaves the shard's slice unwritten.
    r.set(broken.ids_by_perform_in_zset, "not a sorted set")
    with pytest.raises(lowkiq.PartialEnqueue) as caught:
        Bulk.perform_async(batch)
    exc = caught.value
    on_broken = [i for i, job in enumerate(batch) if lowkiq.current().queue(Bulk).shard_of(job["id"]) == 0]
    assert exc.not_written == on_broken and not exc.uncertain
    assert "WRONGTYPE" in str(exc)
    check_agrees(exc, batch, queued(r))
    # Every slice refused: Redis wrote none of the call, and its own error says why.
    with pytest.raises(redis.ResponseError, match="WRONGTYPE") as refused:
        Bulk.perform_async([batch[i] for i in on_broken])
    assert not isinstance(refused.value, lowkiq.PartialEnqueue)


@pytest.mark.slow
def test_a_call_redis_takes_longer_than_the_socket_timeout_to_read_goes_through(own_redis, admin):
    """The timeout bounds each wait for Redis to read more, not the whole send of a large call."""
    lowkiq.configure(workers=[Bulk], redis_url=own_redis.url, pool_timeout=TIMEOUT)
    try:
        # A call longer than the timeout, so that the test means something: how many jobs that takes depends
        # on the machine, so the batch grows until one does (the ids of a smaller batch merge into the next).
        for count in (120_000, 360_000, 1_080_000):
            batch = jobs(count, size=100)
            started = time.monotonic()
            assert Bulk.perform_async(batch) == len(batch)
            took = time.monotonic() - started
            assert len(queued(admin)) == len(batch)
            if took > TIMEOUT:
                break
        else:
            pytest.fail(f"no call took longer than the {TIMEOUT} s timeout: the test proves nothing here")
    finally:
        lowkiq.runtime._current = None
