"""Recurring schedules in a server: the keeper's cheap check for due ticks, and their enqueue.

Every live server runs one; none is special. Each remembers, per schedule, the
high-water mark Redis last told it and the next tick after it, so a beat with
nothing due costs a comparison per schedule and no round trip. When a tick is
due (by Redis's time, see ``lowkiq.redis_clock``), it sends the ticks above
the mark it knows to ``schedule_tick``, which pushes only those above the
mark Redis holds: however many servers send a tick, it is enqueued once.

A server watches from its first successful heartbeat: ticks that came due
before (no server running, or none reaching Redis) are *missed* ticks, and
the schedule's ``catch_up`` decides about them; so are those due while the
schedule was paused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import log_format
from ..schedule import CATCH_UP_LIMIT
from ..store import lua, schedules

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..schedule import Schedule

log = logging.getLogger("lowkiq.server")

# The least wait before a tick Redis called early is sent again: no busy loop on a clock that lags.
EARLY_RETRY = 0.005
# Schedules sent to Redis in one check at most: a beat's work stays bounded whatever their number.
PER_CHECK = 200


@dataclass
class Watched:
    schedule: Schedule
    known: bool = False  # the mark below was read from Redis
    mark: float | None = None
    paused: bool = False
    next_due: float = 0.0  # Redis time of the next tick to send, when known and not paused
    # Redis refused a tick as early: not sent again before this Redis time (estimated here)
    hold_until: float = 0.0

    def due_at(self) -> float:
        return max(self.next_due, self.hold_until)


class Ticker:
    def __init__(self, runtime: Runtime, wire: lua.Wire) -> None:
        self.runtime = runtime
        self.wire = wire
        self.watched = [Watched(s) for s in runtime.settings.schedules]
        self.watching_since: float | None = None
        self._turn = 0

    def watching(self, now: float) -> None:
        """A heartbeat answered at Redis time ``now``: ticks due from now on are seen coming due."""
        if self.watching_since is None:
            self.watching_since = now

    def blind(self) -> None:
        """Redis stopped answering: ticks that come due before it answers again are missed ticks."""
        self.watching_since = None

    def due_in(self, now: float) -> float | None:
        """Seconds (of Redis time) until the next tick to send, or None when none is known."""
        due = [w.due_at() for w in self.watched if w.known and not w.paused]
        return None if not due else max(0.0, min(due) - now)

    def check(self, now: float) -> None:
        """Send what is due at Redis time ``now``: unknown and paused schedules are read, due ticks sent."""
        if self.watching_since is None or not self.watched:
            return
        picked: list[Watched] = []
        count = len(self.watched)
        for k in range(count):
            w = self.watched[(self._turn + k) % count]
            if not w.known or w.paused or now >= w.due_at():
                picked.append(w)
                if len(picked) >= PER_CHECK:
                    self._turn = (self._turn + k + 1) % count  # the rest first next time
                    break
        if not picked:
            return
        dump = self.runtime.settings.dump_payload
        calls = [schedules.tick_call(w.schedule, self._ticks(w, now), self.watching_since, dump) for w in picked]
        replies = self.wire.call_many(calls, settle=True)
        for w, reply in zip(picked, replies):
            if isinstance(reply, Exception):
                log.warning("schedule %s: its tick was not enqueued (%s: %s); retrying", w.schedule.name,
                            type(reply).__name__, reply,
                            extra=log_format.fields(schedule=w.schedule.name, error=str(reply)))
                continue
            self._learn(w, schedules.outcome_of(reply), now)

    def _ticks(self, w: Watched, now: float) -> Sequence[float]:
        if not w.known or w.paused:
            return ()  # read the state first: the ticks to send start at Redis's mark
        assert self.watching_since is not None
        after = w.mark if w.mark is not None else self.watching_since
        # The latest ticks only: catch_up enqueues at most CATCH_UP_LIMIT missed ticks. Redis enqueues none that
        # is ahead of its own clock, so this estimate of it only decides when to ask.
        return w.schedule.ticks_between(after, now, CATCH_UP_LIMIT + 1)

    def _learn(self, w: Watched, out: schedules.TickOutcome, now: float) -> None:
        was_paused = w.paused
        w.known = True
        w.paused = out.outcome == "paused"
        if out.mark is not None:
            w.mark = out.mark
        if w.paused != was_paused:
            log.info("schedule %s is %s", w.schedule.name, "paused" if w.paused else "resumed",
                     extra=log_format.fields(schedule=w.schedule.name, paused=w.paused))
        # The next tick to send: after the mark, or after what this server watches for a new schedule.
        after = w.mark if w.mark is not None else (self.watching_since if self.watching_since is not None else now)
        w.next_due = w.schedule.next_after(after)
        w.hold_until = 0.0
        if out.outcome == "early" and out.redis_now is not None:
            # This process's estimate of Redis's time ran ahead of it: ask again when Redis gets there.
            w.hold_until = now + max(EARLY_RETRY, w.next_due - out.redis_now)
        if out.ticks:
            name, worker = w.schedule.name, w.schedule.worker.__name__
            log.info("schedule %s: enqueued %s", name, ", ".join(f"{t:.0f}" for t in out.ticks[-5:]),
                     extra=log_format.fields(schedule=name, worker=worker, ticks=list(out.ticks)))
            self.runtime.events.emit("tick_enqueued", schedule=name, worker=worker, ticks=list(out.ticks),
                                     lag=now - out.ticks[-1])
