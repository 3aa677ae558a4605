"""The server in-process: start-up order, last_words, and a thread crash stopping the process."""

from __future__ import annotations

import threading

import pytest

import lowkiq
from conftest import wait_until
from lowkiq.schedulers import Seq
from lowkiq.server import NoWorkers, Server


class Noted(lowkiq.Worker):
    shards_count = 2
    done: list = []

    def perform(self, payloads_by_id):
        type(self).done.extend(payloads_by_id)


@pytest.fixture(autouse=True)
def reset():
    Noted.done = []


def test_restore_and_on_server_init_happen_before_threads_take_jobs(configure):
    events = []
    runtime = configure(workers=[Noted], on_server_init=lambda: events.append(("init", list(Noted.done))),
                        poll_interval=0.05)
    runtime.clock = __import__("time").time
    Noted.perform_async([{"id": 1}])
    q = runtime.queue(Noted)
    q.ack_and_take(None, (q.shard_of("1"), 10))  # a previous process died with id 1 in processing
    server = Server(runtime)
    thread = threading.Thread(target=lambda: events.append(("exit", server.run(handle_signals=False))))
    thread.start()
    wait_until(lambda: Noted.done == ["1"])
    server.shutdown()
    thread.join(5)
    assert events == [("init", []), ("exit", 0)]
    assert lowkiq.current().queries(Noted).busy() == []


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
