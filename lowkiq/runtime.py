"""The configured lowkiq of this process: settings plus the Redis client built from them.

This is the one global, set at the edge by ``lowkiq.configure``; everything
below it receives its collaborators explicitly.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import redis

from . import connection
from .config import Settings, build_settings

# Raised here; defined with every error users may catch, and importable from here too.
from .errors import NotConfigured as NotConfigured
from .events import Bus
from .jobs import PreparedJob, job_list, prepare
from .middleware import run_chain
from .redis_clock import RedisClock
from .store import dependencies, layout, registry
from .store.actions import Actions
from .store.id_history import IdHistories
from .store.queries import Queries
from .store.queue import Queue
from .transport import Transport

if TYPE_CHECKING:
    from .worker import Worker


class Runtime:
    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self._client: Transport | None = None
        self._lock = threading.Lock()
        self._registered: set[str] = set()
        self.events = Bus(settings.subscribers)
        # Redis's time in this process, kept by a server's keeper: what due work waits for.
        self.redis_clock = RedisClock()
        self._producers: ThreadPoolExecutor | None = None  # aenqueue's threads, made at its first call
        # Each worker's Queue on the client's transport, made once: perform_async is often a call of one job
        self._queues: dict[type[Worker], Queue] = {}

    @property
    def redis_url(self) -> str:
        """The configured URL (``redis://``, ``rediss://``, ``unix://``, ``redis+sentinel://``), else the embedded Redis's."""
        return self.settings.redis_url or connection.embedded_url(connection.embedded_dir(self.settings.workers))

    @property
    def client(self) -> Transport:
        """The transport of enqueueing clients and the console (``client_pool_size`` connections per node)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self.new_client(self.settings.client_pool_size)
        return self._client

    def new_client(self, pool_size: int) -> Transport:
        """A transport of its own (e.g. a server thread's): its own pools of ``pool_size`` connections per node."""
        return Transport(self.redis_url, pool_size=pool_size, timeout=self.settings.pool_timeout)

    def queue(self, worker: type[Worker], client: Transport | redis.Redis | None = None) -> Queue:
        if client is None:
            made = self._queues.get(worker)
            # made again when the clock was set by hand or the client was closed since
            if made is None or made.clock is not self.clock or made.client is not self._client:
                made = self._queues[worker] = self._queue(worker, self.client)
            return made
        return self._queue(worker, client)

    def _queue(self, worker: type[Worker], client: Transport | redis.Redis) -> Queue:
        s = self.settings
        return Queue(client, worker.keys(), load_payload=s.load_payload, load_error=s.load_error,
                     clock=self.clock, worker=worker,
                     durable_wait_ms=int(s.replica_wait * 1000) if s.durable_enqueue else None)

    def queries(self, worker: type[Worker]) -> Queries:
        s = self.settings
        return Queries(self.client, worker.keys(), load_payload=s.load_payload, load_error=s.load_error)

    def actions(self, worker: type[Worker], *, actor: str = "") -> Actions:
        return Actions(self.client, worker.keys(), clock=self.clock, actor=actor)

    def histories(self, worker: type[Worker]) -> IdHistories:
        return IdHistories(self.client, worker.keys(), load_error=self.settings.load_error)

    def enqueue(self, worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
        jobs = job_list(jobs)

        def write() -> int:
            # With the real clock, a missing score or perform_in is the Redis server's now.
            now = None if self.clock is time.time else self.clock()
            prepared = prepare(jobs, now=now, dump_payload=self.settings.dump_payload)
            if not prepared:
                return 0
            plain, dependent = dependencies.checked(worker, prepared, self.settings.workers)
            self._register_once(worker)
            if not self.events.active:
                return self._push(worker, plain, dependent)
            started = time.perf_counter()
            count = self._push(worker, plain, dependent)
            self.events.emit("enqueued", worker=worker.__name__, jobs=count, seconds=time.perf_counter() - started)
            return count

        written: int = run_chain(self.settings.client_middlewares, worker, jobs, write)
        return written

    async def aenqueue(self, worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
        """``enqueue`` without blocking the event loop: the same call, on one of ``client_pool_size`` threads
        sharing the client's pooled connections (docs/async.md says why, not a second, asyncio Redis client).
        The caller's context variables go along, for the client middlewares."""
        if self._producers is None:
            with self._lock:
                if self._producers is None:
                    self._producers = ThreadPoolExecutor(self.settings.client_pool_size,
                                                         thread_name_prefix="lowkiq-enqueue")
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        written: int = await loop.run_in_executor(self._producers, context.run, self.enqueue, worker, jobs)
        return written

    def _push(self, worker: type[Worker], plain: Sequence[PreparedJob], dependent: Sequence[PreparedJob]) -> int:
        """Jobs without ``after`` first: a job of the same call may wait for them (docs/dependencies.md)."""
        count = self.queue(worker).push(plain) if plain else 0
        if dependent:
            count += dependencies.enqueue(self.client, worker, dependent, self.settings.workers,
                                          history=str(worker.history_length))
        return count

    def due_clock(self) -> Callable[[], float]:
        """The clock that decides when due work starts: Redis's (see lowkiq.redis_clock), or a hand-moved
        test clock, which the scripts then take as given too."""
        return self.redis_clock.now if self.clock is time.time else self.clock

    def register(self, workers: Sequence[type[Worker]]) -> None:
        """Record the workers for the console, after checking their layout (``LayoutMismatch``)."""
        layout.claim(self.client, workers)
        registry.register(self.client, workers)
        self._registered.update(w.__name__ for w in workers)

    def _register_once(self, worker: type[Worker]) -> None:
        if worker.__name__ not in self._registered:
            self.register([worker])

    def close(self) -> None:
        if self._producers is not None:
            self._producers.shutdown(wait=False)
            self._producers = None
        self._queues.clear()
        if self._client is not None:
            self._client.close()
            self._client = None


_current: Runtime | None = None

# Set by lowkiq.testing.inline() while it is active, for the whole process: perform_async then performs
# the call's jobs in the caller, and nothing reaches Redis (nor needs lowkiq configured).
InlineEnqueue = Callable[["type[Worker]", Sequence[Mapping[str, Any]]], int]
inline_enqueue: InlineEnqueue | None = None
InlineAenqueue = Callable[["type[Worker]", Sequence[Mapping[str, Any]]], Awaitable[int]]
inline_aenqueue: InlineAenqueue | None = None


def enqueue(worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
    """What ``Worker.perform_async`` does: the configured runtime writes the jobs, or, inside
    ``lowkiq.testing.inline()``, they are performed at once (``aenqueue`` is the same for
    ``aperform_async``)."""
    performer = inline_enqueue
    if performer is not None:
        return performer(worker, jobs)
    return current().enqueue(worker, jobs)


async def aenqueue(worker: type[Worker], jobs: Sequence[Mapping[str, Any]]) -> int:
    """What ``Worker.aperform_async`` does: ``enqueue`` off the event loop, or, inside
    ``lowkiq.testing.inline()``, the jobs performed at once (async performs awaited)."""
    performer = inline_aenqueue
    if performer is not None:
        return await performer(worker, jobs)
    return await current().aenqueue(worker, jobs)


def configure(**options: Any) -> Runtime:
    """Configure lowkiq for this process. See docs/configuration.md for every option.

    Example::

        lowkiq.configure(workers=[OrdersWorker], redis_url="redis://localhost:6379/0")
    """
    global _current
    settings = build_settings(options)
    if _current is not None:
        _current.close()
    _current = Runtime(settings)
    return _current


def current() -> Runtime:
    if _current is None:
        raise NotConfigured("lowkiq is not configured: call lowkiq.configure(workers=[...]) first")
    return _current
