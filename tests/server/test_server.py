"""The server in-process: start-up order, last_words, and a thread crash stopping the process."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from queue_support import acquire
from timing_support import wait_until

import lowkiq
from lowkiq.server import NoWorkers, Server
from lowkiq.server.schedulers import Seq


class Noted(lowkiq.Worker):
    shards_count = 2
    done: ClassVar[list[Any]] = []

    def perform(self, payloads_by_id):
        type(self).done.extend(payloads_by_id)


@pytest.fixture(autouse=True)
def reset():
    Noted.done = []


@pytest.mark.slow
def test_on_server_init_happens_before_threads_take_jobs_and_a_dead_owners_batch_comes_back(configure):
    events = []
    runtime = configure(workers=[Noted], on_server_init=lambda: events.append(("init", list(Noted.done))),
                        poll_interval=0.05, heartbeat_interval=0.2, settle=0.2, lease_ttl=2)
    runtime.clock = __import__("time").time
    Noted.perform_async([{"id": 1}])
    q = runtime.queue(Noted)
    dead = acquire(q, q.shard_of("1"), "a-process-that-died", ttl=1)
    q.ack_and_take(None, (dead, 10))  # it died with id 1 in processing
    server = Server(runtime)
    thread = threading.Thread(target=lambda: events.append(("exit", server.run(handle_signals=False))))
    thread.start()
    wait_until(lambda: Noted.done == ["1"])
    server.shutdown()
    thread.join(5)
    assert events == [("init", []), ("exit", 0)]
    assert lowkiq.current().queries(Noted).busy() == []


@pytest.mark.slow
def test_a_crash_outside_perform_calls_last_words_and_exits_1(configure):
    class Broken(Seq):
        def next_shard(self):
            raise RuntimeError("scheduler bug")

    words = []
    runtime = configure(workers=[Noted], build_scheduler=Broken, last_words=words.append, threads_per_node=2)
    assert Server(runtime).run(handle_signals=False) == 1
    assert [str(w) for w in words] == ["scheduler bug"]


def test_on_server_init_raising_reaches_last_words(configure):
    def init():
        raise OSError("cannot open the cache")

    words = []
    runtime = configure(workers=[Noted], on_server_init=init, last_words=words.append)
    with pytest.raises(OSError):
        Server(runtime).run(handle_signals=False)
    assert [str(w) for w in words] == ["cannot open the cache"]


def test_no_workers(configure):
    with pytest.raises(NoWorkers):
        Server(configure(workers=[])).run(handle_signals=False)


@pytest.mark.slow
def test_redis_refusing_writes_is_waited_out_not_fatal(configure, r):
    runtime = configure(workers=[Noted], poll_interval=0.05)
    runtime.clock = time = __import__("time").time
    Noted.perform_async([{"id": i, "perform_in": time() + 1} for i in range(10)])
    server = Server(runtime)
    exits = []
    thread = threading.Thread(target=lambda: exits.append(server.run(handle_signals=False)))
    thread.start()
    wait_until(lambda: server.processors)  # started: restored, threads running
    r.config_set("maxmemory", 1)  # every write now answers "-OOM command not allowed ..."
    try:
        wait_until(lambda: int(r.info("commandstats").get("cmdstat_evalsha", {}).get("failed_calls", 0)) > 0)
        assert Noted.done == [] and thread.is_alive()
    finally:
        r.config_set("maxmemory", 0)
    wait_until(lambda: sorted(Noted.done) == sorted(str(i) for i in range(10)), timeout=15)
    server.shutdown()
    thread.join(10)
    assert exits == [0]


@pytest.mark.slow
def test_broken_retry_in_and_format_error_fall_back_to_the_defaults(configure, caplog):
    class Broken(lowkiq.Worker):
        shards_count = 1

        def retry_in(self, retry_count):
            raise ZeroDivisionError("bad hook")

        def perform(self, payloads_by_id):
            raise RuntimeError("the real failure")

    def format_error(exc):
        raise KeyError("also bad")

    runtime = configure(workers=[Broken], poll_interval=0.05, format_error=format_error)
    runtime.clock = __import__("time").time
    before = runtime.clock()
    Broken.perform_async([{"id": "x"}])
    server = Server(runtime)
    exits = []
    thread = threading.Thread(target=lambda: exits.append(server.run(handle_signals=False)))
    thread.start()
    job = wait_until(lambda: (j := runtime.queries(Broken).job("x")) and j.retry_count == 0 and j)
    failed_by = runtime.clock()
    server.shutdown()
    thread.join(10)
    assert exits == [0]
    assert job.retry_count == 0 and job.error == "RuntimeError: the real failure"  # the default format
    # The default retry_in(0): 15 s plus up to 29 s of jitter, counted from the failure (between the two reads).
    assert before + 15 <= job.perform_in <= failed_by + 15 + 29
    assert "Broken.retry_in failed" in caplog.text and "format_error failed" in caplog.text
