"""One server thread: its own Redis connection, its shards, its scheduler, its loop.

The loop is ack+take (one round trip), perform, repeat. A Redis error does
not end it: the thread logs, backs off (capped) and resumes. When the
failed call was a write whose outcome is unknown (the reply was lost, the
script may have run), the thread first puts its shards' processing areas
back into the queue, which it alone owns: nothing is lost, and at most the
last batch runs again.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Sequence

import redis

from . import schedulers
from .queue import lua
from .shard_handler import Ack, ShardHandler, StopProcess
from .splitters import Shard

if TYPE_CHECKING:
    from .runtime import Runtime
    from .worker import Worker

log = logging.getLogger("lowkiq.server")

# Redis being unreachable, and Redis refusing for a while (OOM, BUSY, MASTERDOWN,
# MISCONF, LOADING, READONLY: all error replies): back off and resume, never exit.
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, OSError)
MAX_BACKOFF = 10.0


class Processor:
    def __init__(
        self,
        number: int,
        shards: Sequence[Shard],
        runtime: "Runtime",
        stop: threading.Event,
        on_fatal: Callable[[BaseException, bool], None],
    ) -> None:
        self.number = number
        self.shards = list(shards)
        self.runtime = runtime
        self.settings = runtime.settings
        self.stop = stop
        self.on_fatal = on_fatal  # (exception, raised by a perform?)
        # Two connections: the wire's, held for the hot path, and one for pipelined probes and failures.
        self.client = runtime.new_client(2)
        self.wire = lua.Wire(self.client)
        instances: dict[type["Worker"], "Worker"] = {}
        queues = {}
        self.handlers: list[ShardHandler] = []
        for shard in self.shards:
            w = shard.worker
            if w not in instances:
                # One instance per thread: a worker's own state is never shared between threads.
                instances[w] = w()
                queues[w] = runtime.queue(w, self.client)
            self.handlers.append(ShardHandler(shard, instances[w], queues[w], self.settings, self.wire, clock=runtime.clock))
        context = schedulers.SchedulerContext(self.shards, self.settings.poll_interval, self.probe, runtime.clock)
        self.scheduler = schedulers.build(self.settings, context)
        self.pending: Ack | None = None
        self.uncertain = False  # a write failed midway: its outcome is unknown
        self.recovering = False
        self.errors_in_a_row = 0
        self.thread = threading.Thread(target=self.run, name=f"lowkiq-{number}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def probe(self) -> list[float | None]:
        """Every owned shard's earliest perform_in, one pipelined round trip of plain reads."""
        pipe = self.client.pipeline(transaction=False)
        for h in self.handlers:
            pipe.zrange(h.queue.keys.shard(h.shard.index).ids_by_perform_in_zset, 0, 0, withscores=True)
        return [head[0][1] if head else None for head in pipe.execute()]

    def run(self) -> None:
        log.info("thread %d started with shards %s", self.number, " ".join(map(str, self.shards)))
        try:
            while not self.stop.is_set():
                try:
                    self.step()
                    self.errors_in_a_row = 0
                except REDIS_ERRORS as exc:
                    self._outage(exc)
            try:
                self._flush()
            except REDIS_ERRORS as exc:
                log.warning("thread %d: could not acknowledge the last batch (%s); it runs again at the next start",
                            self.number, exc)
        except StopProcess as exc:
            self.on_fatal(exc.cause, True)
        except BaseException as exc:  # a bug outside any perform: the process must stop
            log.exception("thread %d crashed", self.number)
            self.on_fatal(exc, False)
        finally:
            self.wire.close(disconnect=True)
            self.client.connection_pool.disconnect()
            log.info("thread %d stopped", self.number)

    def step(self) -> None:
        if self.recovering:
            self._recover()
        index = self.scheduler.next_shard()
        if index is None:
            self._flush()
            self.stop.wait(self.scheduler.idle_for())
            return
        handler = self.handlers[index]
        self.uncertain = True
        taken = handler.take(self.pending)
        self.pending = None
        self.uncertain = False
        self.scheduler.taken(index, len(taken.jobs), taken.next_perform_in)
        if not taken.jobs:
            return
        self.uncertain = True  # from now on the batch is in processing: a lost fail() is recovered
        ack = handler.perform(taken)
        self.uncertain = False
        if ack is None:
            self.scheduler.due(index, self.runtime.clock())
        self.pending = ack

    def _flush(self) -> None:
        if self.pending is not None:
            self.uncertain = True
            self.pending.handler.ack(self.pending.ids)
            self.pending = None
            self.uncertain = False

    def _outage(self, exc: BaseException) -> None:
        self.errors_in_a_row += 1
        if self.uncertain:
            # The reply of a write was lost: whatever it did, the processing areas hold the truth.
            self.recovering = True
            self.pending = None
            self.uncertain = False
        delay = min(MAX_BACKOFF, self.settings.poll_interval * 2 ** min(self.errors_in_a_row - 1, 10))
        log.warning("thread %d: Redis error (%s: %s); retrying in %.1f s", self.number, type(exc).__name__, exc, delay)
        self.stop.wait(delay)

    def _recover(self) -> None:
        restored = 0
        by_queue: dict[int, tuple[ShardHandler, list[int]]] = {}
        for h in self.handlers:
            by_queue.setdefault(id(h.queue), (h, []))[1].append(h.shard.index)
        for h, indexes in by_queue.values():
            restored += h.queue.restore(indexes)
        self.recovering = False
        self.scheduler.forget()
        log.warning("thread %d: Redis is back; %d jobs left in processing went back to the queue", self.number, restored)
