"""lowkiq.contrib.opentelemetry with the SDK's in-memory exporter: a span per perform_async and per
perform, the trace context carried in each payload, a perform linked to every merged payload's enqueue."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import lowkiq
from lowkiq.contrib import opentelemetry as lowkiq_otel
from lowkiq.queue.lua import Wire
from lowkiq.shard_handler import ShardHandler
from queue_support import held_lease


class Orders(lowkiq.Worker):
    shards_count = 1
    batch_size = 10
    seen: list = []
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
