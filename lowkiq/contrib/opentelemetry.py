"""OpenTelemetry tracing of lowkiq: a span per ``perform_async`` and per ``perform``.

    from lowkiq.contrib import opentelemetry as lowkiq_otel

    lowkiq.configure(workers=[...], **lowkiq_otel.middlewares())

The enqueue span (kind PRODUCER) carries its trace context to the server inside each
payload: a payload is stored as ``{"__lowkiq_trace__": {"traceparent": ...}, "payload":
<yours>}`` and unwrapped before ``perform`` sees it, so workers get their payloads as
they were enqueued. A job merges the payloads of many ``perform_async`` calls, so the
perform span (kind CONSUMER) has no single parent: it is linked to the enqueue span of
every payload of its batch. A perform that raises records the exception and ends with
an error status.

Payloads enqueued without the client middleware (other producers, older code) are
handed over untouched and simply contribute no link. The console shows stored
payloads, so it shows the wrapper.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, MutableSequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from .. import __version__

TRACE_KEY = "__lowkiq_trace__"
PAYLOAD_KEY = "payload"
WRAPPER_KEYS = frozenset({TRACE_KEY, PAYLOAD_KEY})
SYSTEM = "lowkiq"


def _tracer(tracer_provider: Any = None) -> Tracer:
    return trace.get_tracer("lowkiq", __version__, tracer_provider=tracer_provider)


def middlewares(tracer_provider: Any = None) -> dict[str, list[Callable[..., Any]]]:
    """``configure()`` keyword arguments adding both middlewares (with the global tracer provider
    unless one is given); append them to your own middlewares if you have some."""
    return {"client_middlewares": [client_middleware(tracer_provider)],
            "server_middlewares": [server_middleware(tracer_provider)]}


def client_middleware(tracer_provider: Any = None) -> Callable[[Any, MutableSequence[Any], Callable[[], Any]], Any]:
    tracer = _tracer(tracer_provider)

    def trace_enqueue(worker: Any, jobs: MutableSequence[Any], call_next: Callable[[], Any]) -> Any:
        with tracer.start_as_current_span(f"{worker.queue_name} publish", kind=SpanKind.PRODUCER,
                                          attributes=_attributes(worker, "publish", len(jobs))) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier:
                for index, job in enumerate(jobs):
                    # A job that is not a dict is left as it is: validation names it after this.
                    if isinstance(job, MutableMapping) or hasattr(job, "keys"):
                        jobs[index] = {**job, PAYLOAD_KEY: {TRACE_KEY: carrier, PAYLOAD_KEY: job.get(PAYLOAD_KEY, "")}}
            written = call_next()
            span.set_attribute("lowkiq.ids_written", written)
            return written

    return trace_enqueue


def server_middleware(tracer_provider: Any = None) -> Callable[[Any, MutableMapping[str, list[Any]], Callable[[], Any]], Any]:
    tracer = _tracer(tracer_provider)

    def trace_perform(worker: Any, batch: MutableMapping[str, list[Any]], call_next: Callable[[], Any]) -> Any:
        links = []
        seen: set[tuple[int, int]] = set()
        payloads = 0
        for job_id, items in batch.items():
            unwrapped = []
            for item in items:
                payloads += 1
                if isinstance(item, dict) and item.keys() == WRAPPER_KEYS:
                    context = trace.get_current_span(propagate.extract(item[TRACE_KEY])).get_span_context()
                    key = (context.trace_id, context.span_id)
                    if context.is_valid and key not in seen:
                        seen.add(key)
                        links.append(Link(context, {"lowkiq.id": job_id}))
                    item = item[PAYLOAD_KEY]
                unwrapped.append(item)
            batch[job_id] = unwrapped
        attributes = _attributes(type(worker), "process", len(batch))
        attributes["lowkiq.payloads"] = payloads
        with tracer.start_as_current_span(f"{type(worker).queue_name} process", kind=SpanKind.CONSUMER,
                                          links=links, attributes=attributes,
                                          record_exception=False, set_status_on_exception=False) as span:
            try:
                return call_next()
            except BaseException as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise

    return trace_perform


def _attributes(worker: Any, operation: str, count: int) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.destination.name": worker.queue_name,
        "messaging.batch.message_count": count,
        "lowkiq.worker": worker.__name__,
    }
