"""Instrumentation events reach the subscribers given to configure, from a real server on a real Redis."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from queue_support import acquire
from redis_server import RedisServer
from timing_support import wait_until

import lowkiq
from lowkiq.events import NAMES, Bus, Event
from lowkiq.server import Server

FAST = {"poll_interval": 0.05, "heartbeat_interval": 0.2, "settle": 0.2, "lease_ttl": 2}


class Sorter(lowkiq.Worker):
    shards_count = 3
    max_retry_count = 1  # a retry, then the morgue

    def retry_in(self, retry_count: int) -> float:
        return 0

    def perform(self, payloads_by_id):
        for job_id in payloads_by_id:
            if job_id.startswith("bad"):
                raise KeyError("customer_id")


class Recorded(list):
    def __call__(self, event: Event) -> None:
        self.append(event)

    def named(self, name: str) -> list[Event]:
        return [e for e in self if e.name == name]


def run(server: Server) -> threading.Thread:
    thread = threading.Thread(target=server.run, kwargs={"handle_signals": False})
    thread.start()
    return thread


@pytest.mark.slow
def test_a_servers_life_is_told_event_by_event(configure):
    seen = Recorded()
    runtime = configure(workers=[Sorter], subscribers=[seen], **FAST)
    runtime.clock = time.time
    assert Sorter.perform_async([{"id": f"ok-{i}"} for i in range(20)] + [{"id": "bad-1"}, {"id": "bad-2"}]) == 22
    server = Server(runtime)
    thread = run(server)
    wait_until(lambda: len({i for e in seen.named("performed") for i in e["ids"]}) == 20
               and len(seen.named("morgued")) >= 1 and sum(len(e["ids"]) for e in seen.named("morgued")) == 2)
    server.shutdown()
    thread.join(10)

    [enqueued] = seen.named("enqueued")
    assert (enqueued["worker"], enqueued["jobs"]) == ("Sorter", 22) and enqueued["seconds"] >= 0
    assert sorted((e["worker"], e["shard"]) for e in seen.named("lease_acquired")) == [("Sorter", s) for s in range(3)]
    taken = [i for e in seen.named("batch_taken") for i in e["ids"]]
    assert sorted(taken) == sorted([f"ok-{i}" for i in range(20)] + ["bad-1", "bad-2"] * 2)  # taken, retried
    assert all(e["thread"].startswith("lowkiq-") for e in seen.named("batch_taken"))
    failed = seen.named("failed")
    assert sorted(i for e in failed for i in e["ids"]) == ["bad-1", "bad-1", "bad-2", "bad-2"]
    assert all(e["error"] == "KeyError: 'customer_id'" and isinstance(e["exception"], KeyError) for e in failed)
    assert sorted(i for e in seen.named("morgued") for i in e["ids"]) == ["bad-1", "bad-2"]
    assert sorted(e["shard"] for e in seen.named("lease_released")) == [0, 1, 2]  # handed over on shutdown
    assert {e.name for e in seen} <= NAMES
    assert all(e.at <= time.time() for e in seen)


@pytest.mark.slow
def test_jobs_that_crashed_their_server_too_often_are_told_as_morgued_at_the_takeover(configure):
    seen = Recorded()
    runtime = configure(workers=[Sorter], subscribers=[seen], crash_limit=1, **FAST)
    runtime.clock = time.time
    Sorter.perform_async([{"id": "bomb"}])
    q = runtime.queue(Sorter)
    shard = q.shard_of("bomb")
    dead = acquire(q, shard, "a-process-that-died", ttl=0.3, crash_limit=1)
    assert [job.id for job in q.ack_and_take(None, (dead, 10)).jobs] == ["bomb"]
    time.sleep(0.5)  # its lease expires with the job in processing: the next owner finds a crash
    server = Server(runtime)
    thread = run(server)
    try:
        wait_until(lambda: seen.named("morgued"))
    finally:
        server.shutdown()
        thread.join(10)
    [morgued] = seen.named("morgued")
    assert (morgued["worker"], morgued["shard"], morgued["ids"]) == ("Sorter", shard, ["bomb"])
    # the dead process's own grant came first (the same path told it), then the server's takeover
    *_, takeover = [e for e in seen.named("lease_acquired") if e["shard"] == shard]
    assert takeover["morgued"] == ["bomb"] and not seen.named("performed")
    assert runtime.queries(Sorter).morgue_job("bomb") is not None


@pytest.mark.slow
def test_a_subscriber_that_raises_is_logged_once_and_the_work_goes_on(configure, caplog):
    def broken(event: Event) -> None:
        raise RuntimeError("exporter down")

    seen = Recorded()
    runtime = configure(workers=[Sorter], subscribers=[broken, seen], **FAST)
    runtime.clock = time.time
    Sorter.perform_async([{"id": f"ok-{i}"} for i in range(10)])
    server = Server(runtime)
    thread = run(server)
    wait_until(lambda: len({i for e in seen.named("performed") for i in e["ids"]}) == 10)
    server.shutdown()
    thread.join(10)
    complaints = Counter(r.getMessage().split(" raised on ")[1].split()[0] for r in caplog.records
                         if "raised on" in r.getMessage())
    assert complaints["performed"] == 1 and complaints["batch_taken"] == 1 and complaints["enqueued"] == 1


def test_subscribers_must_be_callables(configure):
    with pytest.raises(TypeError, match="subscribers must be callables"):
        configure(workers=[Sorter], subscribers=["print"])
    with pytest.raises(TypeError, match="subscribers must be a list"):
        configure(workers=[Sorter], subscribers=print)
    assert not Bus().active and Bus([print]).active


@pytest.mark.slow
def test_an_outage_is_told_when_it_begins_and_when_it_ends(tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    own = RedisServer().start()
    seen = Recorded()
    runtime = lowkiq.configure(workers=[Sorter], redis_url=own.url, subscribers=[seen], pool_timeout=1, **FAST)
    try:
        Sorter.perform_async([{"id": "ok-1"}])
        server = Server(runtime)
        thread = run(server)
        wait_until(lambda: seen.named("performed"))
        own.process.kill()
        own.process.wait(10)
        wait_until(lambda: seen.named("outage_began"), timeout=15)
        own.start()  # the same port, empty: the server takes its shards again
        wait_until(lambda: seen.named("outage_ended"), timeout=30)
        Sorter.perform_async([{"id": "ok-2"}])
        wait_until(lambda: any("ok-2" in e["ids"] for e in seen.named("performed")), timeout=30)
        # A thread whose pooled connection died with the old Redis may report a second, short outage.
        wait_until(lambda: len(seen.named("outage_began")) == len(seen.named("outage_ended")), timeout=15)
        server.shutdown()
        thread.join(15)
        told = [e.name for e in seen if e.name.startswith("outage_")]
        assert told[:2] == ["outage_began", "outage_ended"] and told == ["outage_began", "outage_ended"] * (len(told) // 2)
        assert "Error" in seen.named("outage_began")[0]["error"] and seen.named("outage_ended")[0]["seconds"] > 0
    finally:
        lowkiq.runtime._current = None
        own.stop()
