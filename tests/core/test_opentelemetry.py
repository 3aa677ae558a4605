"""lowkiq.contrib.opentelemetry with the SDK's in-memory exporter: a span per perform_async and per
perform, the trace contexts kept beside the payloads (never inside them, so equal payloads still merge),
a perform linked to every merged payload's enqueue."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from queue_support import held_lease

import lowkiq
from lowkiq.contrib import opentelemetry as lowkiq_otel
from lowkiq.server.shard_handler import ShardHandler
from lowkiq.store.lua import Wire


class Orders(lowkiq.Worker):
    shards_count = 1
    batch_size = 10
    seen: ClassVar[list[Any]] = []
    fail = False

    def retry_in(self, retry_count):
        return 0

    def perform(self, payloads_by_id):
        type(self).seen.append({k: list(v) for k, v in payloads_by_id.items()})
        if type(self).fail:
            raise LookupError("no such order")


@pytest.fixture
def traced(configure):
    Orders.seen, Orders.fail = [], False
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = configure(workers=[Orders], **lowkiq_otel.middlewares(provider))
    return runtime, exporter


def perform_once(runtime):
    q = runtime.queue(Orders)
    handler = ShardHandler(held_lease(q, 0), Orders(), q, runtime.settings, Wire(runtime.client), clock=runtime.clock)
    deadline = time.monotonic() + 5
    while not (taken := handler.take(None)).jobs:  # a retry is due a moment after its failure
        assert time.monotonic() < deadline, "nothing to take"
        time.sleep(0.01)
    return handler.perform(taken)


def test_a_merged_job_s_perform_span_links_every_enqueue_span(traced):
    runtime, exporter = traced
    Orders.perform_async([{"id": "o1", "payload": {"status": "new"}, "score": 1}])
    Orders.perform_async([{"id": "o1", "payload": {"status": "paid"}, "score": 2},
                          {"id": "o2", "payload": "plain text", "score": 3}])
    enqueues = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert [s.name for s in enqueues] == ["Orders publish", "Orders publish"]
    assert [s.attributes["messaging.batch.message_count"] for s in enqueues] == [1, 2]
    assert enqueues[1].attributes["lowkiq.ids_written"] == 2

    assert perform_once(runtime) is not None
    # perform sees the payloads as they were enqueued, not the wrappers that carried the context
    assert Orders.seen == [{"o1": [{"status": "new"}, {"status": "paid"}], "o2": ["plain text"]}]
    [consumer] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert consumer.name == "Orders process" and consumer.parent is None
    linked = {(link.context.trace_id, link.context.span_id) for link in consumer.links}
    assert linked == {(s.context.trace_id, s.context.span_id) for s in enqueues}
    assert (consumer.attributes["messaging.batch.message_count"], consumer.attributes["lowkiq.payloads"]) == (2, 3)
    assert consumer.status.status_code == StatusCode.UNSET


def test_a_failing_perform_records_the_exception_and_the_retry_keeps_the_links(traced):
    runtime, exporter = traced
    Orders.perform_async([{"id": "o3", "payload": 1}])
    Orders.fail = True
    assert perform_once(runtime) is None
    [failed] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert failed.status.status_code == StatusCode.ERROR and "LookupError" in failed.status.description
    assert [e.name for e in failed.events] == ["exception"]
    Orders.fail = False
    perform_once(runtime)  # the retry: the payload still carries its enqueue's context
    retried = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER][-1]
    [enqueue] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert [link.context.span_id for link in retried.links] == [enqueue.context.span_id]
    assert Orders.seen[-1] == {"o3": [1]}


def test_payloads_from_an_untraced_producer_pass_through_without_links(configure):
    Orders.seen, Orders.fail = [], False
    configure(workers=[Orders])  # a producer without the middleware
    Orders.perform_async([{"id": "o4", "payload": {"__lowkiq_trace__": "not a wrapper"}}])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    perform_once(configure(workers=[Orders], **lowkiq_otel.middlewares(provider)))
    assert Orders.seen == [{"o4": [{"__lowkiq_trace__": "not a wrapper"}]}]
    [consumer] = exporter.get_finished_spans()
    assert consumer.kind == SpanKind.CONSUMER and list(consumer.links) == []


def test_a_bad_job_is_still_named_by_validation(traced):
    with pytest.raises(TypeError, match="job 0: must be a dict"):
        Orders.perform_async(["not a job"])


def contexts(r, job_id, worker=Orders):
    key = lowkiq_otel.contexts_key(worker.queue_name, lowkiq.current().queue(worker).shard_of(job_id), job_id)
    return r.smembers(key)


def test_equal_payloads_merge_as_without_tracing_and_the_perform_links_every_producer(traced, r):
    runtime, exporter = traced
    for _ in range(5):
        Orders.perform_async([{"id": "o5", "payload": {"status": "paid"}}])
    # stored once, as plain bytes: the merge rule is the same with tracing on
    [job] = runtime.queries(Orders).jobs(["o5"])
    assert [payload for payload, _ in job.payloads] == [{"status": "paid"}]
    assert len(contexts(r, "o5")) == 5
    enqueues = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert len(enqueues) == 5

    perform_once(runtime)
    assert Orders.seen == [{"o5": [{"status": "paid"}]}]
    [consumer] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    linked = {(link.context.trace_id, link.context.span_id) for link in consumer.links}
    assert linked == {(s.context.trace_id, s.context.span_id) for s in enqueues}
    assert {link.attributes["lowkiq.id"] for link in consumer.links} == {"o5"}
    assert contexts(r, "o5") == set()  # performed: its contexts are gone


class Payments(lowkiq.Worker):
    shards_count = 2
    batch_size = 10
    max_retry_count = 1
    exhausted: ClassVar[list[Any]] = []
    after: ClassVar[list[Any]] = []

    def retry_in(self, retry_count):
        return 0

    def perform(self, payloads_by_id):
        raise ValueError("card declined")

    def retries_exhausted(self, batch):
        type(self).exhausted.extend(batch)


def test_retries_exhausted_later_middlewares_and_the_console_see_plain_payloads(configure, r):
    Payments.exhausted, Payments.after = [], []

    def after(worker, batch, call_next):  # a middleware listed after tracing
        Payments.after.append({k: list(v) for k, v in batch.items()})
        return call_next()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = lowkiq_otel.middlewares(provider)
    runtime = configure(workers=[Payments], client_middlewares=traced["client_middlewares"],
                        server_middlewares=[*traced["server_middlewares"], after])
    Payments.perform_async([{"id": "p1", "payload": {"amount": 5}, "score": 1}])
    Payments.perform_async([{"id": "p1", "payload": {"amount": 5}, "score": 2},
                            {"id": "p1", "payload": "second", "score": 3}])
    q = runtime.queue(Payments)
    handler = ShardHandler(held_lease(q, q.shard_of("p1")), Payments(), q, runtime.settings, Wire(runtime.client),
                           clock=runtime.clock)
    for _ in range(2):  # max_retry_count 1: the second failure sends it to the morgue
        deadline = time.monotonic() + 5
        while not (taken := handler.take(None)).jobs:
            assert time.monotonic() < deadline, "nothing to take"
            time.sleep(0.01)
        assert handler.perform(taken) is None

    assert Payments.after == [{"p1": [{"amount": 5}, "second"]}] * 2
    [dead] = Payments.exhausted
    assert (dead.id, [payload for payload, _ in dead.payloads]) == ("p1", [{"amount": 5}])
    [shown] = runtime.queries(Payments).morgue_jobs(["p1"])
    assert [payload for payload, _ in shown.payloads] == [{"amount": 5}]
    [requeued] = runtime.queries(Payments).jobs(["p1"])  # the rest went back to the queue
    assert [payload for payload, _ in requeued.payloads] == ["second"]
    # the failed perform kept its contexts: the morgued payload's two producers, the other's one
    assert len(contexts(r, "p1", Payments)) == 3
    failed = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert [len(s.links) for s in failed] == [2, 2]  # both producers, again on the retry
    assert {s.status.status_code for s in failed} == {StatusCode.ERROR}


def test_a_context_recorded_while_its_id_is_performed_waits_for_its_own_payload(traced, r):
    runtime, exporter = traced
    Orders.perform_async([{"id": "o6", "payload": "v1"}])
    q = runtime.queue(Orders)
    handler = ShardHandler(held_lease(q, 0), Orders(), q, runtime.settings, Wire(runtime.client), clock=runtime.clock)
    taken = handler.take(None)
    Orders.perform_async([{"id": "o6", "payload": "v2"}])  # queued again while v1 is in processing
    handler.perform(taken)
    first, second = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    [consumer] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert [link.context.span_id for link in consumer.links] == [first.context.span_id]
    assert len(contexts(r, "o6")) == 1
    Orders.seen = []
    perform_once(runtime)
    assert Orders.seen == [{"o6": ["v2"]}]
    latest = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER][-1]
    assert [link.context.span_id for link in latest.links] == [second.context.span_id]


def test_a_payload_in_the_wrapper_of_earlier_versions_is_unwrapped_and_linked(configure):
    Orders.seen, Orders.fail = [], False
    configure(workers=[Orders])
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    Orders.perform_async([{"id": "o7", "payload": {"__lowkiq_trace__": carrier, "payload": {"n": 1}}}])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    perform_once(configure(workers=[Orders], **lowkiq_otel.middlewares(provider)))
    assert Orders.seen == [{"o7": [{"n": 1}]}]
    [consumer] = exporter.get_finished_spans()
    assert [format(link.context.span_id, "016x") for link in consumer.links] == ["b7ad6b7169203331"]


def test_a_failed_enqueue_leaves_no_context(traced, r):
    class Capped(lowkiq.Worker):
        shards_count = 1
        max_payloads_per_id = 1
        payload_overflow = "reject"

    runtime, _ = traced
    Capped.perform_async([{"id": "c1", "payload": 1}])
    with pytest.raises(Exception, match="PAYLOAD_LIMIT"):
        Capped.perform_async([{"id": "c1", "payload": 2}])
    assert len(contexts(r, "c1", Capped)) == 1  # only the enqueue that was written


class AsyncOrders(lowkiq.Worker):
    shards_count = 1
    batch_size = 10
    seen: ClassVar[list[Any]] = []

    def retry_in(self, retry_count):
        return 0

    async def perform(self, payloads_by_id):
        await asyncio.sleep(0.01)
        with_span = trace.get_current_span().get_span_context().is_valid
        type(self).seen.append(({k: list(v) for k, v in payloads_by_id.items()}, with_span))
        if "bad" in payloads_by_id:
            raise LookupError("no such order")


def aperform_once(runtime):
    from lowkiq.server.async_handler import AsyncShardHandler

    q = runtime.queue(AsyncOrders)
    handler = AsyncShardHandler(held_lease(q, 0), AsyncOrders(), q, runtime.settings, Wire(runtime.client),
                                clock=runtime.clock)

    async def run():
        loop = asyncio.get_running_loop()
        handler.offload = lambda fn, *args: loop.run_in_executor(None, functools.partial(fn, *args))
        taken = await handler.offload(handler.take, None)
        return await handler.aperform(taken)

    return asyncio.run(run())


def test_an_async_workers_perform_span_lasts_until_its_perform_is_awaited(configure):
    AsyncOrders.seen = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = configure(workers=[AsyncOrders], **lowkiq_otel.middlewares(provider))
    AsyncOrders.perform_async([{"id": "o1", "payload": {"status": "new"}}])
    assert aperform_once(runtime) is not None
    assert AsyncOrders.seen == [({"o1": [{"status": "new"}]}, True)]  # performed inside the span
    [enqueue] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    [consumer] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert [link.context.span_id for link in consumer.links] == [enqueue.context.span_id]
    assert consumer.end_time - consumer.start_time >= 10_000_000  # ns: the perform's await is inside it

    AsyncOrders.perform_async([{"id": "bad", "payload": 1}])
    assert aperform_once(runtime) is None
    failed = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER][-1]
    assert failed.status.status_code == StatusCode.ERROR and "LookupError" in failed.status.description
    job = runtime.queries(AsyncOrders).job("bad")
    assert job is not None and "LookupError" in (job.error or "")
