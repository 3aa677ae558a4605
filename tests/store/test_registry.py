"""The worker registry in Redis: checked when written and when read."""

from __future__ import annotations

import json
import time

import pytest
from webui_support import OrdersWorker

from lowkiq.store import registry
from lowkiq.store.keys import registry_hash
from lowkiq.store.registry import BrokenEntry, WorkerInfo

GOOD = json.dumps({"queue_name": "orders", "shards_count": 4})


@pytest.mark.parametrize("raw, problem", [
    ("not json", "the entry is not JSON"),
    ("null", "must be a JSON object, got null"),
    ("[1, 2]", "must be a JSON object"),
    ('{"shards_count": 4}', "the entry has no queue_name"),
    ('{"queue_name": "q"}', "the entry has no shards_count"),
    ('{"queue_name": "q", "shards_count": 0}', "shards_count must be a positive int, at most 4096, got 0"),
    ('{"queue_name": "q", "shards_count": "abc"}', "shards_count must be a positive int, at most 4096, got 'abc'"),
    ('{"queue_name": "q", "shards_count": 200000}', "at most 4096, got 200000"),
    ('{"queue_name": "q", "shards_count": 1e9}', "got 1000000000.0"),
    ('{"queue_name": "q", "shards_count": true}', "got True"),
    ('{"queue_name": "a/../b", "shards_count": 2}', "queue_name 'a/../b' may hold only"),
    ('{"queue_name": 7, "shards_count": 2}', "queue_name must be a non-empty string"),
    ('{"queue_name": "q", "shards_count": 2, "batch_size": 0}', "batch_size must be a positive int"),
    ('{"queue_name": "q", "shards_count": 2, "max_retry_count": "x"}', "max_retry_count must be an int >= 0"),
    ("[" * 100_000, "the entry is"),
])
def test_a_malformed_entry_is_read_as_broken_and_the_others_still_work(r, raw, problem):
    r.hset(registry_hash(), mapping={"Good": GOOD, "Bad": raw})
    workers, broken = registry.read(r)
    assert workers == [WorkerInfo("Good", "orders", 4)]
    assert [b.name for b in broken] == ["Bad"] and problem in broken[0].problem
    assert registry.known(r) == workers


def test_a_worker_name_that_breaks_urls_or_is_not_utf8_is_broken(r):
    r.hset(registry_hash(), mapping={"a/b": GOOD, b"\xff\xfe": GOOD})
    broken = {b.name: b.problem for b in registry.read(r)[1]}
    assert "worker name 'a/b' may hold only" in broken["a/b"]
    assert broken["\ufffd\ufffd"] == "the worker name is not UTF-8 text"


def test_register_writes_what_read_accepts(r):
    registry.register(r, [OrdersWorker])
    assert registry.read(r) == ([WorkerInfo("OrdersWorker", "OrdersWorker", 4, 5, 1)], [])
    assert time.time() - 60 < registry.read(r)[0][0].registered_at <= time.time()


def test_register_refuses_a_worker_whose_fields_were_changed_after_definition(r):
    class Mutated(OrdersWorker):
        pass

    Mutated.shards_count = 100_000  # past the class check: the write checks again
    with pytest.raises(ValueError, match="shards_count must be a positive int, at most 4096"):
        registry.register(r, [Mutated])
    assert r.hlen(registry_hash()) == 0


def test_broken_entry_is_a_plain_value():
    assert BrokenEntry("X", "why") == BrokenEntry("X", "why")


def test_forget_unchanged_keeps_an_entry_written_since_it_was_read(r, redis_url):
    from lowkiq.transport import Transport

    registry.register(r, [OrdersWorker])
    read = r.hget(registry_hash(), "OrdersWorker")
    time.sleep(0.01)
    registry.register(r, [OrdersWorker])  # a server started meanwhile: a new registered_at
    client = Transport(redis_url)  # the console's kind of client
    try:
        assert registry.forget_unchanged(client, "OrdersWorker", read) is False
        assert [w.name for w in registry.known(r)] == ["OrdersWorker"]
        assert registry.forget_unchanged(client, "OrdersWorker", r.hget(registry_hash(), "OrdersWorker")) is True
        assert registry.known(r) == []
        assert registry.forget_unchanged(client, "OrdersWorker", read) is False  # already gone
    finally:
        client.close()
