"""``lowkiq.testing.inline()``: ``perform_async`` performs the call's jobs at once, in the caller, with no Redis.

The call goes the way a server would take it, without the queue in between: the client middlewares
around it, the jobs validated and serialized as ``perform_async`` does (``lowkiq.jobs.prepare``),
the jobs of one id merged as the push script merges them into an empty queue, each payload loaded
back with ``load_payload``, and one ``perform({id: payloads})`` per id through the server middlewares.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, cast

from .. import job_context, runtime
from ..config import Settings
from ..errors import PayloadDecodeError
from ..jobs import PreparedJob, job_list, prepare
from ..middleware import arun_chain, run_chain
from ..store.codec import shard_of
from ..worker import Worker, check_perform, is_async

log = logging.getLogger("lowkiq")

# lowkiq not configured: the defaults of lowkiq.configure() (JSON payloads, no middlewares)
_DEFAULTS = Settings()


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Within the block, ``Worker.perform_async(jobs)`` performs the call's jobs at once and returns
    the number of distinct ids, as ``perform_async`` does; nothing is written to Redis, which need not
    be reachable, nor lowkiq configured.

    Each id is performed once, alone: ``perform({id: payloads})`` (a batch of one id, whatever
    ``batch_size``), ids in the order the call first names them. The jobs are validated as
    ``perform_async`` validates them (a bad job raises the same TypeError or ValueError, and nothing
    is performed); the jobs of one id are merged by the merge rules (every distinct payload once,
    with its lowest score, ordered by score); ``perform_in`` is not waited for. The configured client
    middlewares wrap the call and the server middlewares each perform; ``lowkiq.context()`` works in
    the perform (its lease never ends). An exception of a perform propagates to the caller at once:
    no retry, no morgue, and the ids after it are not performed. No ``time_limit`` is applied.

    ``await Worker.aperform_async(jobs)`` does the same, awaiting an async worker's performs (and its
    coroutine server middlewares); ``perform_async`` of an async worker runs them with ``asyncio.run``
    where no event loop runs in the calling thread (inside one, use ``aperform_async``).

    It switches ``perform_async`` and ``aperform_async`` for the whole process, every thread, while the block runs: use it
    in tests that do not run in parallel in one process. Blocks nest.

    Example::

        with lowkiq.testing.inline():
            OrdersWorker.perform_async([{"id": 42, "payload": {"status": "paid"}}])
        assert orders.get(42).status == "paid"
    """
    previous, previous_async = runtime.inline_enqueue, runtime.inline_aenqueue
    runtime.inline_enqueue, runtime.inline_aenqueue = perform_now, aperform_now
    try:
        yield
    finally:
        runtime.inline_enqueue, runtime.inline_aenqueue = previous, previous_async


def perform_now(worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
    """``perform_async`` inside ``inline()``: the call's jobs performed in the caller; the count of distinct ids."""
    configured = runtime._current
    settings = _DEFAULTS if configured is None else configured.settings
    listed = job_list(jobs)
    if is_async(worker):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(aperform_now(worker, listed))
        raise RuntimeError(f"{worker.__name__} is an async worker and an event loop runs in this thread: "
                           f"await {worker.__name__}.aperform_async(jobs) inside lowkiq.testing.inline() instead")

    def perform() -> int:
        by_id, instance = _prepared(worker, listed)
        for job_id, payloads in by_id.items():
            _perform_one(instance, job_id, payloads, settings)
        return len(by_id)

    count: int = run_chain(settings.client_middlewares, worker, listed, perform)
    return count


async def aperform_now(worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
    """``aperform_async`` inside ``inline()``: as ``perform_now``, an async worker's performs awaited. The client
    middlewares wrap the call's validation and merge; the performs follow."""
    settings = _settings()
    listed = job_list(jobs)
    if not is_async(worker):
        return perform_now(worker, listed)
    ready: list[tuple[dict[str, list[Any]], Worker]] = []

    def prepared() -> int:
        ready.append(_prepared(worker, listed))
        return len(ready[0][0])

    count: int = run_chain(settings.client_middlewares, worker, listed, prepared)
    for by_id, instance in ready:
        for job_id, payloads in by_id.items():
            await _aperform_one(instance, job_id, payloads, settings)
    return count


def _settings() -> Settings:
    configured = runtime._current
    return _DEFAULTS if configured is None else configured.settings


def _prepared(worker: type[Worker], listed: list[Mapping[str, Any]]) -> tuple[dict[str, list[Any]], Worker]:
    """The call's jobs validated, merged and loaded back, by id; and the worker instance to perform them."""
    configured = runtime._current
    settings = _settings()
    now = time.time() if configured is None else configured.clock()
    prepared = prepare(listed, now=now, dump_payload=settings.dump_payload)
    if not prepared:
        return {}, worker()
    check_perform(worker)
    by_id = {job_id: [_loaded(settings, job_id, payload) for payload, _ in payloads]
             for job_id, payloads in merged(prepared, worker, now).items()}
    return by_id, worker()


def merged(prepared: Sequence[PreparedJob], worker: type[Worker], now: float) -> dict[str, list[tuple[bytes, float]]]:
    """The call's jobs by id as the push script merges them into an empty queue (SPEC, "Merge rules"):
    every distinct payload once, with its lowest score, ordered by score then bytewise. Past the worker's
    ``max_payloads_per_id``, "drop_oldest" keeps the newest and "reject" refuses the whole call."""
    lowest: dict[str, dict[bytes, float]] = {}
    for job in prepared:
        scores = lowest.setdefault(job.id, {})
        score = now if job.score is None else job.score
        held = scores.get(job.payload)
        if held is None or score < held:
            scores[job.payload] = score
    limit, overflow = worker.max_payloads_per_id, worker.payload_overflow
    by_id = {}
    for job_id, scores in lowest.items():
        ordered = sorted(scores.items(), key=lambda pair: (pair[1], pair[0]))
        if limit is not None and len(ordered) > limit:
            if overflow == "reject":
                raise ValueError(f"PAYLOAD_LIMIT id {job_id} would hold {len(ordered)} payloads; the limit is {limit} "
                                 f"(max_payloads_per_id); nothing of this call was performed")
            log.warning("%s: %d older payloads dropped past max_payloads_per_id = %d (payload_overflow "
                        "\"drop_oldest\")", worker.queue_name, len(ordered) - limit, limit)
            ordered = ordered[-limit:]
        by_id[job_id] = ordered
    return by_id


def _loaded(settings: Settings, job_id: str, payload: bytes) -> Any:
    try:
        return settings.load_payload(payload)
    except Exception as exc:  # as a server's take reports it
        raise PayloadDecodeError(f"payload of id {job_id!r} cannot be loaded: {type(exc).__name__}: {exc}") from exc


async def _aperform_one(instance: Worker, job_id: str, payloads: list[Any], settings: Settings) -> None:
    batch = {job_id: payloads}
    worker = type(instance)
    # A task of its own: its context is a copy, so the caller's comes back by itself afterwards.
    context = job_context.Context(worker.__name__, shard_of(job_id, worker.shards_count), InlineLease())

    async def perform() -> None:
        job_context.enter(context)
        perform_batch = cast(Callable[[Any], Awaitable[None]], instance.perform)
        await arun_chain(settings.server_middlewares, instance, batch, partial(perform_batch, batch))

    await asyncio.ensure_future(perform())


def _perform_one(instance: Worker, job_id: str, payloads: list[Any], settings: Settings) -> None:
    batch = {job_id: payloads}
    worker = type(instance)
    # A perform may enqueue, and so perform, other jobs: its own context comes back afterwards.
    outer, deadline = job_context.entered()
    job_context.enter(job_context.Context(worker.__name__, shard_of(job_id, worker.shards_count), InlineLease()))
    try:
        if settings.server_middlewares:
            run_chain(settings.server_middlewares, instance, batch, lambda: instance.perform(batch))
        else:
            instance.perform(batch)
    finally:
        if outer is None:
            job_context.leave()
        else:
            job_context.enter(outer, deadline)


_fence_lock = threading.Lock()
_last_fence = 0


class InlineLease:
    """What ``lowkiq.context()`` reads in an inline perform: a lease that never ends, and a fencing token
    higher than every one given before in this process (its fence counts microseconds of this host's clock,
    as a grant's counts Redis's)."""

    def __init__(self) -> None:
        global _last_fence
        with _fence_lock:
            _last_fence = max(_last_fence + 1, time.time_ns() // 1000)
            self.fencing_token = (0, _last_fence)

    @property
    def deadline(self) -> float:
        return math.inf

    def remaining(self) -> float:
        return math.inf

    def is_lost(self) -> bool:
        return False
