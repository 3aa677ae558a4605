"""OpenTelemetry tracing of lowkiq: a span per ``perform_async`` and per ``perform``.

    from lowkiq.contrib import opentelemetry as lowkiq_otel

    lowkiq.configure(workers=[...], **lowkiq_otel.middlewares())

Payloads are stored exactly as they would be without tracing, so equal payloads still
merge into one, and ``perform``, ``retries_exhausted``, every middleware and the console
all see them as enqueued. The enqueue span's (kind PRODUCER) trace context is kept
beside the job instead: a Redis set per id, in the shard's hash slot, whose members are
``<digest of the payload's bytes> <trace context as JSON>``. Five ``perform_async`` calls
of one equal payload store that payload once and five contexts.

A job merges the payloads of many ``perform_async`` calls, so the perform span (kind
CONSUMER) has no single parent: it is linked to every context recorded for the payloads
of its batch. A perform that succeeds removes the contexts it linked; one that raises
keeps them (the retry links them again), records the exception and ends with an error
status. A context recorded while the same id was being performed with other payloads
waits for the perform of its own payload. Contexts expire ``context_ttl`` seconds after
their id last enqueued or failed (default 30 days, longer than 25 retries), so those of
jobs deleted from the morgue do not stay forever.

Tracing never fails a job: when Redis refuses the contexts' reads or writes, the span
simply has fewer links (logged as a warning). Payloads enqueued without the client
middleware are handed over untouched and contribute no link; so do payloads whose
``dump_payload(load_payload(bytes))`` is not the stored bytes (a custom serializer that
does not round-trip). Payloads stored by earlier versions of this module wrapped as
``{"__lowkiq_trace__": {...}, "payload": <yours>}`` are unwrapped for ``perform`` and
linked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, MutableSequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer

from .. import __version__
from ..jobs import prepare
from ..runtime import current
from ..serializers import to_bytes
from ..store.codec import shard_of
from ..store.keys import ShardKeys
from ..worker import is_async

# The wrapper of earlier versions, still unwrapped when met in a queue.
TRACE_KEY = "__lowkiq_trace__"
PAYLOAD_KEY = "payload"
WRAPPER_KEYS = frozenset({TRACE_KEY, PAYLOAD_KEY})
SYSTEM = "lowkiq"
CONTEXT_TTL = 30 * 24 * 3600

log = logging.getLogger("lowkiq.contrib.opentelemetry")

# (Redis key, members): contexts to add, or to remove once their payloads were performed.
Recorded = list[tuple[str, list[str]]]


def contexts_key(queue_name: str, shard: int, job_id: str) -> str:
    """The set of trace contexts of one id: under the shard's hash tag, so that a Redis Cluster keeps
    it in the slot of the job it describes."""
    return f"{ShardKeys(queue_name, shard).tag}:trace_contexts:{job_id}"


def digest(payload: bytes) -> str:
    """What ties a context to its payload: equal bytes, equal digest (as equal bytes merge)."""
    return hashlib.blake2b(payload, digest_size=8).hexdigest()


def _tracer(tracer_provider: Any = None) -> Tracer:
    return trace.get_tracer("lowkiq", __version__, tracer_provider=tracer_provider)


def middlewares(tracer_provider: Any = None, *, context_ttl: int = CONTEXT_TTL) -> dict[str, list[Callable[..., Any]]]:
    """``configure()`` keyword arguments adding both middlewares (with the global tracer provider
    unless one is given); append them to your own middlewares if you have some, so that the
    contexts are recorded for the payloads as they are finally written."""
    return {"client_middlewares": [client_middleware(tracer_provider, context_ttl=context_ttl)],
            "server_middlewares": [server_middleware(tracer_provider, context_ttl=context_ttl)]}


def client_middleware(tracer_provider: Any = None, *, context_ttl: int = CONTEXT_TTL,
                      ) -> Callable[[Any, MutableSequence[Any], Callable[[], Any]], Any]:
    tracer = _tracer(tracer_provider)

    def trace_enqueue(worker: Any, jobs: MutableSequence[Any], call_next: Callable[[], Any]) -> Any:
        with tracer.start_as_current_span(f"{worker.queue_name} publish", kind=SpanKind.PRODUCER,
                                          attributes=_attributes(worker, "publish", len(jobs))) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            # Recorded before the push: a server may perform the job the moment it is written.
            recorded = _record(worker, jobs, carrier, context_ttl) if carrier else []
            try:
                written = call_next()
            except BaseException:
                # Nothing (or not all) was written: a context left behind would link a later,
                # unrelated enqueue of the same payload.
                _send(recorded, "SREM", "remove the trace contexts of a failed enqueue")
                raise
            span.set_attribute("lowkiq.ids_written", written)
            return written

    return trace_enqueue


def server_middleware(tracer_provider: Any = None, *, context_ttl: int = CONTEXT_TTL,
                      ) -> Callable[[Any, MutableMapping[str, list[Any]], Callable[[], Any]], Any]:
    tracer = _tracer(tracer_provider)

    def trace_perform(worker: Any, batch: MutableMapping[str, list[Any]], call_next: Callable[[], Any]) -> Any:
        links: list[Link] = []
        seen: set[tuple[int, int]] = set()

        def link(context: SpanContext, job_id: str) -> None:
            key = (context.trace_id, context.span_id)
            if context.is_valid and key not in seen:
                seen.add(key)
                links.append(Link(context, {"lowkiq.id": job_id}))

        payloads = _unwrap_legacy(batch, link)
        performed = _linked(worker, batch, link)
        attributes = _attributes(type(worker), "process", len(batch))
        attributes["lowkiq.payloads"] = payloads

        @contextlib.contextmanager
        def span() -> Iterator[None]:
            with tracer.start_as_current_span(f"{type(worker).queue_name} process", kind=SpanKind.CONSUMER,
                                              links=links, attributes=attributes,
                                              record_exception=False, set_status_on_exception=False) as current:
                try:
                    yield
                except BaseException as exc:
                    current.record_exception(exc)
                    current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    # The contexts stay for the retry; a retry may come long after the last enqueue.
                    _send([(key, [str(context_ttl)]) for key, _ in performed], "EXPIRE",
                          "keep the trace contexts of a failed perform")
                    raise

        if is_async(type(worker)):
            # An async worker's call_next() is an awaitable: the span lasts until it is awaited (docs/async.md).
            async def traced() -> Any:
                with span():
                    result = await call_next()
                await asyncio.to_thread(_send, performed, "SREM", "remove the trace contexts of a performed batch")
                return result

            return traced()
        with span():
            result = call_next()
        _send(performed, "SREM", "remove the trace contexts of a performed batch")
        return result

    return trace_perform


def _record(worker: Any, jobs: Iterable[Any], carrier: Mapping[str, str], ttl: int) -> Recorded:
    """Write ``carrier`` beside every payload of ``jobs``; what was written, to undo it."""
    settings = current().settings
    try:
        # The same validation and serialization as the write: ids as stored, payloads as bytes.
        prepared = prepare(list(jobs), now=0.0, dump_payload=settings.dump_payload)
    except (TypeError, ValueError):
        return []  # the write raises the same error, naming the job
    context = json.dumps(dict(carrier), sort_keys=True, separators=(",", ":"))
    members: dict[str, set[str]] = {}
    for job in prepared:
        key = contexts_key(worker.queue_name, shard_of(job.id, worker.shards_count), job.id)
        members.setdefault(key, set()).add(f"{digest(job.payload)} {context}")
    recorded = [(key, sorted(values)) for key, values in members.items()]
    commands: list[tuple[str, tuple[Any, ...]]] = []
    for key, values in recorded:
        commands += [(key, ("SADD", key, *values)), (key, ("EXPIRE", key, ttl))]
    try:
        current().client.pipeline_commands(commands)
    except Exception as exc:
        log.warning("could not record trace contexts for %s: %s: %s", worker.queue_name, type(exc).__name__, exc)
        return []
    return recorded


def _linked(worker: Any, batch: Mapping[str, list[Any]], link: Callable[[SpanContext, str], None]) -> Recorded:
    """Link the contexts recorded for the payloads of ``batch``; returns them, to remove them once performed."""
    settings = current().settings
    keys: dict[str, tuple[str, set[str]]] = {}
    for job_id, items in batch.items():
        digests = set()
        for item in items:
            try:
                digests.add(digest(to_bytes(settings.dump_payload(item))))
            except Exception:  # a payload the serializer refuses simply has no link
                continue
        keys[job_id] = (contexts_key(worker.queue_name, shard_of(job_id, worker.shards_count), job_id), digests)
    try:
        replies = current().client.pipeline_commands([(key, ("SMEMBERS", key)) for key, _ in keys.values()])
    except Exception as exc:
        log.warning("could not read trace contexts for %s: %s: %s", worker.queue_name, type(exc).__name__, exc)
        return []
    performed: Recorded = []
    for (job_id, (key, digests)), members in zip(keys.items(), replies):
        mine = []
        for raw in members or ():
            member = raw.decode() if isinstance(raw, bytes) else str(raw)
            payload_digest, _, context = member.partition(" ")
            # Contexts of other payloads (enqueued while this batch was taken) wait for their own perform.
            if payload_digest not in digests:
                continue
            mine.append(member)
            try:
                carrier = json.loads(context)
            except ValueError:
                continue  # not written by this module: removed with the rest, never linked
            if isinstance(carrier, dict):
                link(trace.get_current_span(propagate.extract(carrier)).get_span_context(), job_id)
        if mine:
            performed.append((key, mine))
    return performed


def _unwrap_legacy(batch: MutableMapping[str, list[Any]], link: Callable[[SpanContext, str], None]) -> int:
    """Unwrap payloads stored inside the wrapper of earlier versions (linking their context); returns
    how many payloads the batch holds."""
    count = 0
    for job_id, items in batch.items():
        count += len(items)
        if not any(isinstance(item, dict) and item.keys() == WRAPPER_KEYS for item in items):
            continue
        unwrapped = []
        for item in items:
            if isinstance(item, dict) and item.keys() == WRAPPER_KEYS and isinstance(item[TRACE_KEY], dict):
                link(trace.get_current_span(propagate.extract(item[TRACE_KEY])).get_span_context(), job_id)
                item = item[PAYLOAD_KEY]
            unwrapped.append(item)
        batch[job_id] = unwrapped
    return count


def _send(recorded: Recorded, command: str, what: str) -> None:
    if not recorded:
        return
    try:
        current().client.pipeline_commands([(key, (command, key, *values)) for key, values in recorded])
    except Exception as exc:
        log.warning("could not %s: %s: %s", what, type(exc).__name__, exc)


def _attributes(worker: Any, operation: str, count: int) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.destination.name": worker.queue_name,
        "messaging.batch.message_count": count,
        "lowkiq.worker": worker.__name__,
    }
