"""Which of its shards a server thread works next.

A process's threads share one scheduler over the shards the process holds (the pool,
``lowkiq.server.shard_pool``), or with a splitter each thread has its own over the shards
it was given (indexes into ``context.shards``). A thread asks ``next_shard()``; ``None``
means "nothing to do", and the thread waits ``idle_for()`` seconds (woken early by
shutdown). ``busy`` holds the indexes other threads are performing now: the built-in
schedulers choose among the others. After every take the thread reports what it found
with ``taken()``, which is how a scheduler learns for free what Redis knows.

Workers' ``priority`` (docs/fairness.md): among shards with ready work, both built-in schedulers take
from the highest priority first; equal priorities follow the scheduler as before. In a shard that holds
grouped jobs the head a take reports is the next group's place in its round robin, so a shard whose
group waits longest goes first whatever the other shards' backlogs.

Example, a custom scheduler that always prefers shard 0::

    class Greedy(lowkiq.server.schedulers.Seq):
        def next_shard(self):
            return 0 if self.empty_in_a_row == 0 else super().next_shard()

    lowkiq.configure(workers=[...], build_scheduler=Greedy)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings
    from ..worker import Shard

INF = math.inf
# Head perform_in of each owned shard (None: empty), one pipelined round trip.
Probe = Callable[[], Sequence["float | None"]]


@dataclass
class SchedulerContext:
    shards: Sequence[Shard]
    poll_interval: float
    probe: Probe
    clock: Callable[[], float] = field(default=time.time)


class Scheduler:
    """The interface; a custom scheduler is any callable(context) returning one of these."""

    def __init__(self, context: SchedulerContext) -> None:
        self.context = context
        self.count = len(context.shards)
        self.priorities = [getattr(shard.worker, "priority", 0) for shard in context.shards]
        # None when every shard has the same priority: the schedulers' paths of old, at no cost
        self.levels = sorted(set(self.priorities), reverse=True) if len(set(self.priorities)) > 1 else None
        # indexes of the shards other threads are performing now (a pool's), not to be chosen
        self.busy: set[int] = set()

    def next_shard(self) -> int | None:
        raise NotImplementedError

    def idle_for(self) -> float:
        return self.context.poll_interval

    def taken(self, index: int, found: int, next_perform_in: float | None) -> None:
        """A take on shard ``index`` returned ``found`` ids; its next job is due at ``next_perform_in``."""

    def due(self, index: int, perform_in: float) -> None:
        """A job of shard ``index`` (a failed one coming back) is due at ``perform_in``."""

    def forget(self) -> None:
        """Whatever was known about the shards is stale (after an outage and a restore)."""


# Seconds within which a probe is fresh enough for a thread about to idle.
LOOK_AGAIN = 0.02


class Lag(Scheduler):
    """The shard whose oldest ready job is most overdue.

    A cache of every owned shard's head perform_in costs nothing to keep:
    each take's reply carries the shard's new head. Other processes only
    add jobs (or an operator moves them), so the cache is refreshed by one
    pipelined probe of all owned shards at most every ``poll_interval``, and
    before the thread idles on a cache that says nothing is ready.
    """

    def __init__(self, context: SchedulerContext) -> None:
        super().__init__(context)
        self.heads: list[float] = [-INF] * self.count  # unknown: worth a take
        self.probed_at = -INF
        self._indexes = range(self.count)

    def next_shard(self) -> int | None:
        now = self.context.clock()
        if now - self.probed_at >= self.context.poll_interval:
            self._probe(now)
        index = self._oldest()
        if index is not None and self.heads[index] <= now:
            return index
        if index is not None and self.probed_at < now - LOOK_AGAIN:
            # The cache may have missed new jobs: look once before idling (not again within LOOK_AGAIN:
            # many threads or async slots idling at once would each probe every shard).
            self._probe(now)
            index = self._oldest()
            if index is not None and self.heads[index] <= now:
                return index
        return None

    def idle_for(self) -> float:
        heads = self._free_heads()
        wait = (min(heads) if heads else INF) - self.context.clock()
        return min(self.context.poll_interval, max(wait, 0.001))

    def taken(self, index: int, found: int, next_perform_in: float | None) -> None:
        self.heads[index] = INF if next_perform_in is None else next_perform_in

    def due(self, index: int, perform_in: float) -> None:
        self.heads[index] = min(self.heads[index], perform_in)

    def forget(self) -> None:
        self.probed_at = -INF

    def _free_heads(self) -> list[float]:
        """The heads with every busy shard's as INF (never the minimum of a free one): a pool of hundreds of shards
        is searched by C loops (min, index) at each checkout, not by a Python loop over its shards."""
        if not self.busy:
            return self.heads
        heads = self.heads.copy()
        for index in self.busy:
            if 0 <= index < len(heads):
                heads[index] = INF
        return heads

    def _oldest(self) -> int | None:
        heads = self._free_heads()
        soonest = min(heads, default=INF)
        if soonest == INF:  # every shard busy (None), or none known to hold work: the first free one
            return next((i for i in self._indexes if i not in self.busy), None)
        oldest = heads.index(soonest)
        if self.levels is None:
            return oldest
        now = self.context.clock()
        if soonest > now:
            return oldest  # nothing ready: the soonest, whatever its priority
        priorities = self.priorities
        return min((i for i in self._indexes if heads[i] <= now), key=lambda i: (-priorities[i], heads[i]))

    def _probe(self, now: float) -> None:
        self.heads = [INF if head is None else head for head in self.context.probe()]
        self.probed_at = now


class Seq(Scheduler):
    """Round robin; idle ``poll_interval`` only after a full round found nothing.

    With priorities: round robin among the shards of the highest priority; a priority whose full round
    found nothing is passed over for ``poll_interval``, and the thread idles once every one was.
    """

    def __init__(self, context: SchedulerContext) -> None:
        super().__init__(context)
        self.position = -1
        self.empty_in_a_row = 0
        levels = self.levels or []
        self.members = [[i for i in range(self.count) if self.priorities[i] == level] for level in levels]
        self.cursor = [-1] * len(levels)
        self.empty = [0] * len(levels)
        self.resting_until = [-INF] * len(levels)
        self.level_of = {i: n for n, members in enumerate(self.members) for i in members}

    def next_shard(self) -> int | None:
        if self.levels is not None:
            return self._next_by_priority()
        free = self.count - len(self.busy)
        if free <= 0 or self.empty_in_a_row >= free:
            self.empty_in_a_row = 0
            return None
        for _ in range(self.count):
            self.position = (self.position + 1) % self.count
            if self.position not in self.busy:
                return self.position
        return None

    def _next_by_priority(self) -> int | None:
        now = self.context.clock()
        for n, members in enumerate(self.members):
            if self.empty[n] >= len(members):
                self.empty[n] = 0
                self.resting_until[n] = now + self.context.poll_interval
            if self.resting_until[n] > now:
                continue
            for _ in range(len(members)):
                self.cursor[n] = (self.cursor[n] + 1) % len(members)
                if members[self.cursor[n]] not in self.busy:
                    return members[self.cursor[n]]
            # every shard of this priority is busy: the next priority's turn
        self.resting_until = [-INF] * len(self.members)  # a round of every priority found nothing
        return None

    def taken(self, index: int, found: int, next_perform_in: float | None) -> None:
        self.empty_in_a_row = 0 if found else self.empty_in_a_row + 1
        if self.levels is not None:
            n = self.level_of[index]
            self.empty[n] = 0 if found else self.empty[n] + 1


BUILT_IN: dict[str, Callable[[SchedulerContext], Scheduler]] = {"lag": Lag, "seq": Seq}


def build(settings: Settings, context: SchedulerContext) -> Scheduler:
    """The scheduler ``settings.build_scheduler`` names: "lag", "seq" or a callable(context)."""
    choice = settings.build_scheduler
    if callable(choice):
        scheduler: Scheduler = choice(context)
        return scheduler
    try:
        return BUILT_IN[choice](context)
    except KeyError:
        raise ValueError(f"unknown scheduler {choice!r}: use 'lag', 'seq' or a callable(context)") from None
