"""What happens in a lowkiq process, told to subscribers: the one seam for logs, metrics and traces.

Subscribers are callables given to ``lowkiq.configure(subscribers=[...])``; each
receives every ``Event``. The runtime's hot path asks ``bus.active`` before it
builds an event, so a process without subscribers pays one attribute read per
batch. A subscriber runs on the thread that did the work and must be quick; one
that raises is logged (once per subscriber and event name) and never stops the
work it observes.

Events and their fields (``worker`` is the worker's class name, ``shard`` its index):

- ``enqueued``: worker, jobs (how many ``perform_async`` wrote), seconds
- ``batch_taken``: worker, shard, ids, thread
- ``performed``: worker, shard, ids, seconds
- ``failed``: worker, shard, ids, seconds, error (the stored text), exception
- ``morgued``: worker, shard, ids (moved to the morgue by this failure)
- ``time_limit_ignored``: worker, shard, thread (a perform of a thread-isolated worker still runs a
  second after ``TimeLimitExceeded`` was raised in it: it caught it, or waits in C code)
- ``lease_acquired``: worker, shard, epoch, restored (jobs of a dead owner's batch put back), morgued
- ``lease_lost``: worker, shard, reason (another process holds it now)
- ``lease_released``: worker, shard
- ``queue_paused``, ``queue_resumed``: queue (this server saw the pause begin or end)
- ``tick_enqueued``: schedule, worker, ticks (unix times this server enqueued jobs for; each tick is
  enqueued by one server only), lag (seconds of Redis time from the newest of them to its enqueue)
- ``outage_began``: error (Redis stopped answering this process)
- ``outage_ended``: seconds (how long it lasted)
- ``duty_failed``: duty, error, failures (one of the keeper's periodic duties raised; it is retried with a
  back-off, and the server keeps holding and serving its shards)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("lowkiq.events")

NAMES = frozenset({
    "enqueued", "batch_taken", "performed", "failed", "morgued", "time_limit_ignored", "lease_acquired",
    "lease_lost", "lease_released",
    "outage_began", "outage_ended", "queue_paused", "queue_resumed", "tick_enqueued", "duty_failed",
})


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    at: float  # unix time
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


Subscriber = Callable[[Event], None]


class Bus:
    """Delivers events to the subscribers; ``active`` is False when there are none."""

    def __init__(self, subscribers: Iterable[Subscriber] = ()) -> None:
        self.subscribers = tuple(subscribers)
        for subscriber in self.subscribers:
            if not callable(subscriber):
                raise TypeError(f"subscribers must be callables taking an Event, got {subscriber!r}")
        self.active = bool(self.subscribers)
        self._complained: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        # Outages are per process, whichever thread saw them first.
        self._outage_since: float | None = None

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber (before the threads that emit start)."""
        if not callable(subscriber):
            raise TypeError(f"subscribers must be callables taking an Event, got {subscriber!r}")
        self.subscribers = (*self.subscribers, subscriber)
        self.active = True

    def emit(self, name: str, **fields: Any) -> None:
        if not self.active:
            return
        assert name in NAMES, name
        event = Event(name, time.time(), fields)
        for subscriber in self.subscribers:
            try:
                subscriber(event)
            except Exception:
                key = (id(subscriber), name)
                if key not in self._complained:
                    self._complained.add(key)
                    log.exception("event subscriber %r raised on %s (logged once)", subscriber, name)

    def outage(self, error: BaseException) -> None:
        """Redis failed this process: ``outage_began`` once, until ``redis_answered``."""
        if not self.active:
            return
        with self._lock:
            if self._outage_since is not None:
                return
            self._outage_since = time.monotonic()
        self.emit("outage_began", error=f"{type(error).__name__}: {error}")

    def redis_answered(self) -> None:
        if not self.active or self._outage_since is None:
            return
        with self._lock:
            since, self._outage_since = self._outage_since, None
        if since is not None:
            self.emit("outage_ended", seconds=time.monotonic() - since)


SILENT = Bus()
