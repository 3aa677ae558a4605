"""One batch of one shard on a real Redis: perform, middlewares, ack folded into the next take, retries, morgue."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
from queue_support import held_lease

import lowkiq
from lowkiq.server.shard_handler import ShardHandler, StopProcess
from lowkiq.store.lua import Wire


class Orders(lowkiq.Worker):
    shards_count = 1
    batch_size = 3
    max_retry_count = 2
    calls: ClassVar[list[Any]] = []
    error: BaseException | None = None
    exhausted: ClassVar[list[Any]] = []

    def retry_in(self, retry_count):
        return 10 * (retry_count + 1)

    def perform(self, payloads_by_id):
        type(self).calls.append(payloads_by_id)
        if type(self).error is not None:
            raise type(self).error

    def retries_exhausted(self, batch):
        type(self).exhausted.append(batch)


@pytest.fixture
def runtime(configure):
    Orders.calls, Orders.error, Orders.exhausted = [], None, []
    return configure(workers=[Orders])


def handler(runtime, **options) -> ShardHandler:
    if options:
        runtime = lowkiq.configure(redis_url=runtime.settings.redis_url, workers=[Orders], **options)
    return ShardHandler(held_lease(runtime.queue(Orders), 0), Orders(), runtime.queue(Orders), runtime.settings,
                        Wire(runtime.client), clock=lambda: 1000.0)


def test_perform_gets_payloads_by_ascending_score_and_ack_rides_on_the_next_take(runtime):
    Orders.perform_async([{"id": 1, "payload": "v3", "score": 3}, {"id": 1, "payload": "v1", "score": 1},
                          {"id": 2, "payload": {"x": 1}, "score": 5}, {"id": 1, "payload": "v2", "score": 2}])
    h = handler(runtime)
    taken = h.take(None)
    ack = h.perform(taken)
    assert Orders.calls == [{"1": ["v1", "v2", "v3"], "2": [{"x": 1}]}]
    assert sorted(ack.ids) == ["1", "2"]
    assert len(runtime.queries(Orders).busy()) == 2  # not acknowledged yet
    assert h.take(ack).jobs == []
    assert runtime.queries(Orders).busy() == []
    assert runtime.client.hget(Orders.keys().shard(0).counters_hash, "processed") == b"2"


def test_a_batch_holds_at_most_batch_size_ids(runtime):
    Orders.perform_async([{"id": i} for i in range(7)])
    h = handler(runtime)
    sizes, ack = [], None
    while True:
        taken = h.take(ack)
        if not taken.jobs:
            break
        ack = h.perform(taken)
        sizes.append(len(taken.jobs))
    assert sizes == [3, 3, 1]


def test_middlewares_wrap_perform_first_outermost(runtime):
    seen = []

    def outer(worker, batch, call_next):
        seen.append(("outer", type(worker).__name__, sorted(batch)))
        result = call_next()
        seen.append("outer done")
        return result

    def inner(worker, batch, call_next):
        seen.append("inner")
        return call_next()

    Orders.perform_async([{"id": 1}])
    h = handler(runtime, server_middlewares=[outer, inner])
    assert h.perform(h.take(None)) is not None
    assert seen == [("outer", "Orders", ["1"]), "inner", "outer done"]


def test_an_exception_retries_every_job_of_the_batch_with_retry_in(runtime, caplog):
    Orders.perform_async([{"id": 1, "payload": "a"}, {"id": 2, "payload": "b"}])
    Orders.error = ValueError("db down")
    h = handler(runtime)
    with caplog.at_level(logging.ERROR, logger="lowkiq.server"):
        assert h.perform(h.take(None)) is None
    q = runtime.queries(Orders)
    for job_id in ("1", "2"):
        job = q.job(job_id)
        assert (job.retry_count, job.perform_in, job.error) == (0, 1000.0 + 10, "ValueError: db down")
    assert runtime.client.hget(Orders.keys().shard(0).counters_hash, "failed") == b"2"
    assert "Orders shard 0: ids [" in caplog.text and "db down" in caplog.text
    # the second failure uses retry_in(1)
    h2 = ShardHandler(h.lease, h.worker, h.queue, h.settings, h.wire, clock=lambda: 2000.0)
    h2.perform(h2.take(None))
    assert q.job("1").retry_count == 1 and q.job("1").perform_in == 2000.0 + 20


def test_format_and_dump_error_are_used(runtime):
    Orders.perform_async([{"id": 1}])
    Orders.error = KeyError("k")
    h = handler(runtime, format_error=lambda exc: f"{type(exc).__name__}: {exc}",
                dump_error=lambda text: text.upper().encode())
    h.perform(h.take(None))
    assert runtime.queries(Orders).job("1").error == "KEYERROR: 'K'"


def test_after_max_retry_count_the_oldest_payload_goes_to_the_morgue_and_the_hook_runs(runtime):
    Orders.perform_async([{"id": 1, "payload": "old", "score": 1}, {"id": 1, "payload": "new", "score": 2}])
    Orders.error = RuntimeError("always")
    clock = [1000.0]
    h = handler(runtime)
    h.clock = lambda: clock[0]
    for _attempt in range(3):  # retry_count -1 -> 0 -> 1 -> 2 == max_retry_count
        taken = h.take(None)
        assert [j.id for j in taken.jobs] == ["1"]
        h.perform(taken)
        clock[0] += 100
        runtime.actions(Orders).perform_all_now()
    dead = runtime.queries(Orders).morgue_job("1")
    assert [p for p, _ in dead.payloads] == ["old"] and dead.error == "RuntimeError: always"
    rest = runtime.queries(Orders).job("1")
    assert [p for p, _ in rest.payloads] == ["new"] and rest.retry_count == -1
    assert [[m.id for m in batch] for batch in Orders.exhausted] == [["1"]]


def test_a_raising_retries_exhausted_hook_is_logged_not_fatal(runtime, caplog):
    class Hooked(Orders):
        queue_name = "Orders"
        max_retry_count = 1

        def retries_exhausted(self, batch):
            raise RuntimeError("hook broke")

    Orders.perform_async([{"id": 1}])
    Orders.error = RuntimeError("x")
    h = ShardHandler(held_lease(runtime.queue(Hooked), 0), Hooked(), runtime.queue(Hooked), runtime.settings, None,
                     clock=lambda: 5.0)
    with caplog.at_level(logging.ERROR, logger="lowkiq.server"):
        for _ in range(2):  # retry_count -1 -> 0, then 1 == max_retry_count
            assert h.perform(h.take(None)) is None
            runtime.actions(Orders).perform_all_now()
    assert runtime.queries(Orders).morgue_job("1") is not None
    assert "retries_exhausted raised" in caplog.text and "hook broke" in caplog.text


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt()])
def test_a_base_exception_fails_the_batch_and_asks_to_stop(runtime, error):
    Orders.perform_async([{"id": 1, "payload": "keep"}])
    Orders.error = error
    h = handler(runtime)
    with pytest.raises(StopProcess) as raised:
        h.perform(h.take(None))
    assert raised.value.cause is error
    job = runtime.queries(Orders).job("1")
    assert job.retry_count == 0 and [p for p, _ in job.payloads] == ["keep"]
    assert runtime.queries(Orders).busy() == []


def test_a_payload_that_cannot_be_loaded_fails_its_batch_instead_of_stopping_the_server(runtime, r):
    Orders.perform_async([{"id": 1, "payload": "fine", "score": 1}, {"id": 2, "payload": "also fine", "score": 1}])
    # Bytes that are not JSON, as a writer with another serializer would leave them.
    import msgpack

    keys = Orders.keys().shard(0)
    r.hset(keys.payloads_hash, "2", msgpack.packb([b"\x80not json", 1.0], use_bin_type=False))
    h = handler(runtime)
    taken = h.take(None)
    assert isinstance(taken.error, ValueError) and "payload of id '2' cannot be loaded" in str(taken.error)
    assert h.perform(taken) is None
    assert Orders.calls == []  # perform never saw the batch
    job = runtime.queries(Orders).job("2")
    assert job.retry_count == 0 and "cannot be loaded" in job.error
    # The console still shows the job, the bad payload as such.
    (payload, score), = job.payloads
    assert isinstance(payload, lowkiq.jobs.UndecodablePayload) and payload.raw == b"\x80not json"
    assert "undecodable payload" in repr(payload)
    assert runtime.queries(Orders).job("1").payloads == [("fine", 1.0)]


def test_the_default_error_names_the_exception_class():
    from lowkiq.serializers import format_error

    assert format_error(KeyError("customer_id")) == "KeyError: 'customer_id'"
    assert format_error(RuntimeError()) == "RuntimeError"
