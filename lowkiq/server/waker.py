"""Wakes a server thread when a push gives one of its idle shards work.

A thread with nothing due sleeps up to ``poll_interval`` before it looks
again. The push script publishes on ``WAKE_CHANNEL`` when it makes a shard's
earliest job earlier (an idle shard got work); this thread, one per server
process, listens and wakes the thread serving that shard, so a job enqueued
on a quiet system starts within a round trip, not a poll later.

Only a hint: a message lost (Redis unreachable, a failover, this
connection reset) costs at most the poll the thread would have made anyway.
On a Redis Cluster, Pub/Sub messages reach every node, so one connection to
any primary hears every shard.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis

from ..store.keys import WAKE_CHANNEL
from ..store.membership import MEMBERS_MESSAGE

if TYPE_CHECKING:
    from ..transport import Transport
    from .processor import Processor

log = logging.getLogger("lowkiq.server")

ERRORS = (redis.RedisError, OSError)
MAX_BACKOFF = 10.0


class Waker:
    def __init__(self, transport: Transport, processors: list[Processor], stop: threading.Event,
                 poll_interval: float, on_members: Callable[[], None] | None = None) -> None:
        self.transport = transport
        self.processors = processors
        # A member came, began to leave or left: the keeper beats now, not up to a heartbeat later.
        self.on_members = on_members
        self.stop = stop
        self.poll_interval = poll_interval
        self.subscribed = threading.Event()  # listening now (for tests and the log)
        self.thread = threading.Thread(target=self.run, name="lowkiq-waker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def run(self) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                self._listen()
                failures = 0
            except ERRORS as exc:
                self.subscribed.clear()
                failures += 1
                delay = min(MAX_BACKOFF, 0.5 * 2 ** min(failures - 1, 10))
                if failures == 1:
                    log.info("waker: not listening for pushes (%s: %s); threads poll every %.1f s until it is back",
                             type(exc).__name__, exc, self.poll_interval)
                self.transport.suspect()  # a failover: ask for the primary again
                self.stop.wait(delay)
            except Exception:  # a bug here must not stop the process: polling still serves every shard
                self.subscribed.clear()
                log.exception("waker stopped; threads poll every %.1f s", self.poll_interval)
                break
        self.transport.close()

    def _listen(self) -> None:
        pubsub = self.transport.client_for(None).pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call,unused-ignore]
        try:
            pubsub.subscribe(WAKE_CHANNEL)
            self.subscribed.set()
            while not self.stop.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is not None and message["type"] == "message":
                    self._wake(message["data"])
        finally:
            self.subscribed.clear()
            pubsub.close()

    def _wake(self, data: bytes | str) -> None:
        text = data.decode() if isinstance(data, bytes) else data
        if text == MEMBERS_MESSAGE:
            if self.on_members is not None:
                self.on_members()
            return
        queue_name, _, shard = text.rpartition(":")
        if not shard.isdigit():
            return
        for processor in self.processors:
            processor.nudge(queue_name, int(shard))
