"""``lowkiq.testing.inline()``: ``perform_async`` performs the call's jobs at once, in the caller, with no Redis.

The call goes the way a server would take it, without the queue in between: the client middlewares
around it, the jobs validated and serialized as ``perform_async`` does (``lowkiq.jobs.prepare``),
the jobs of one id merged as the push script merges them into an empty queue, each payload loaded
back with ``load_payload``, and one ``perform({id: payloads})`` per id through the server middlewares.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import job_context, runtime
from ..config import Settings
from ..errors import PayloadDecodeError
from ..jobs import PreparedJob, job_list, prepare
from ..middleware import run_chain
from ..store.codec import shard_of
from ..worker import Worker, check_perform

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

    It switches ``perform_async`` for the whole process, every thread, while the block runs: use it
    in tests that do not run in parallel in one process. Blocks nest.

    Example::

        with lowkiq.testing.inline():
            OrdersWorker.perform_async([{"id": 42, "payload": {"status": "paid"}}])
        assert orders.get(42).status == "paid"
    """
    previous = runtime.inline_enqueue
    runtime.inline_enqueue = perform_now
    try:
        yield
    finally:
        runtime.inline_enqueue = previous


def perform_now(worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
    """``perform_async`` inside ``inline()``: the call's jobs performed in the caller; the count of distinct ids."""
    configured = runtime._current
    settings = _DEFAULTS if configured is None else configured.settings
    listed = job_list(jobs)

    def perform() -> int:
        now = time.time() if configured is None else configured.clock()
        prepared = prepare(listed, now=now, dump_payload=settings.dump_payload)
        if not prepared:
            return 0
        check_perform(worker)
        by_id = merged(prepared, worker, now)
        instance = worker()
        for job_id, payloads in by_id.items():
            _perform_one(instance, job_id, [_loaded(settings, job_id, payload) for payload, _ in payloads],
                         settings)
        return len(by_id)

    count: int = run_chain(settings.client_middlewares, worker, listed, perform)
    return count


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
