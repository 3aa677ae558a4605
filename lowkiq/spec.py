"""What lowkiq reads of a worker class and of a schedule without running them, declared once at the bottom.

The store, the server and the console need a worker's name, queue, shards, batch, retries, time limit,
isolation, morgue policy and (an async worker's) concurrency, a ``Shard``, and a schedule's ``Rule``;
``lowkiq.Worker`` and ``lowkiq.Schedule`` are built on these declarations. Each attribute declared here is checked here, by the
one function that both a worker's class definition and the registry's reader call.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol
from zoneinfo import ZoneInfo

from croniter import croniter  # type: ignore[import-untyped]  # croniter ships no type hints

from .store.keys import validate_queue_name

# Shards of one worker at most: each is a handful of keys that the worker's page and every
# stats read visit; a read of several workers is bounded apart (metrics.CONSOLE_SHARD_BUDGET).
MAX_SHARDS_COUNT = 4096
# Each batch in flight holds a slot with its own Redis connections: a bound that keeps a typo from opening
# a connection storm.
MAX_CONCURRENCY = 10_000
# Where a worker's performs run, and what its morgue does at retries exhausted (Worker.isolation,
# Worker.morgue_policy): recorded so that a console without the app's code can flag performs past
# their time_limit and count the ids a whole_id morgue holds.
ISOLATIONS = ("thread", "process")
MORGUE_POLICIES = ("oldest_payload", "whole_id")
# What a schedule does with the ticks it missed while no server ran it.
CATCH_UP = ("last", "all", "none")


class WorkerSpec:
    """The attributes of a worker that lowkiq records and reads without the app's code (lowkiq.Worker's base).

    Each is checked when a subclass is defined: a bad value raises TypeError or ValueError naming it.
    """

    shards_count: ClassVar[int] = 5
    batch_size: ClassVar[int] = 1
    max_retry_count: ClassVar[int] = 25
    queue_name: ClassVar[str] = "Worker"
    # Keeping ordered work flowing (docs/keeping-work-flowing.md): a perform's time limit in seconds
    # (None: none), where performs run ("process": supervised child processes), and what goes to the
    # morgue at retries exhausted.
    time_limit: ClassVar[float | None] = None
    isolation: ClassVar[str] = "thread"
    morgue_policy: ClassVar[str] = "oldest_payload"
    # An async worker's (``async def perform``, docs/async.md): how many of its batches one server process
    # performs at once on its event loop. Sync workers keep threads_per_node.
    concurrency: ClassVar[int] = 100

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "queue_name" not in cls.__dict__:
            cls.queue_name = cls.__name__
        name = cls.__name__
        # Both names appear in the console's URLs and in Redis keys: refuse any that would not survive them.
        validate_queue_name(name, "worker name")
        validate_queue_name(cls.queue_name, f"{name}.queue_name")
        check_shards_count(cls.shards_count, f"{name}.shards_count")
        check_positive(cls.batch_size, f"{name}.batch_size")
        check_count(cls.max_retry_count, f"{name}.max_retry_count")
        check_time_limit(cls.time_limit, f"{name}.time_limit")
        check_one_of(cls.isolation, ISOLATIONS, f"{name}.isolation")
        check_one_of(cls.morgue_policy, MORGUE_POLICIES, f"{name}.morgue_policy")
        check_concurrency(cls.concurrency, f"{name}.concurrency")


def check_concurrency(value: Any, what: str = "concurrency") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ValueError(f"{what} must be an int 1..{MAX_CONCURRENCY} (batches of an async worker one server "
                         f"process performs at once), got {value!r}")
    return int(value)


def is_coroutine(fn: Any) -> bool:
    """Whether calling ``fn`` makes a coroutine (or an async generator) instead of doing its work."""
    if fn is None:
        return False
    target: Any
    if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, functools.partial):
        target = fn
    else:  # an object with an async __call__
        target = type(fn).__call__ if callable(fn) else fn
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


def is_async(cls: type[Any]) -> bool:
    """Whether the worker is an async worker: its perform is ``async def`` (served by the event loop)."""
    perform = getattr(cls, "perform", None)
    # An async generator's body never runs by being awaited: such a perform stays refused.
    return is_coroutine(perform) and not inspect.isasyncgenfunction(perform)


def check_shards_count(value: Any, what: str = "shards_count") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHARDS_COUNT:
        raise ValueError(f"{what} must be a positive int, at most {MAX_SHARDS_COUNT}, got {value!r}")
    return int(value)


def check_positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return int(value)


def check_count(value: Any, what: str) -> int:
    """``value`` if it is an int >= 0 (``max_retry_count`` 0: the first failure goes to the morgue)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be an int >= 0, got {value!r}")
    return int(value)


def check_time_limit(value: Any, what: str = "time_limit") -> None:
    """None, or a positive finite number of seconds: TypeError for what is no number, ValueError below it."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a positive number of seconds or None, got {value!r:.100}")
    if value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds or None, got {value!r}")


def check_one_of(value: Any, allowed: tuple[str, ...], what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be one of {', '.join(allowed)}, got {value!r:.100}")
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {value!r:.100}")


@dataclass(frozen=True)
class Shard:
    """One shard of one worker's queue."""

    # A lowkiq.Worker subclass: typed loosely, as this module lies below worker.py, which re-exports Shard.
    worker: type[Any]
    index: int

    def __str__(self) -> str:
        return f"{self.worker.__name__}{self.index}"


class ScheduleSpec(Protocol):
    """What the store reads of a lowkiq.Schedule: its name, worker, rule, job id and payloads."""

    @property
    def name(self) -> str: ...
    @property
    def worker(self) -> type[WorkerSpec]: ...
    @property
    def cron(self) -> str | None: ...
    @property
    def every(self) -> float | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def catch_up(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def job_id(self) -> str: ...
    def payload_for(self, tick: float) -> dict[str, Any]: ...
    def definition(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Rule:
    """When a schedule ticks: ``every`` seconds since the epoch, or ``cron`` in ``timezone``. Checked by
    ``Schedule``; the console builds one from the registry without the app's code."""

    cron: str | None
    every: int | None
    timezone: str = "UTC"

    def next_after(self, moment: float) -> float:
        """The first tick strictly after ``moment`` (unix seconds)."""
        if self.every is not None:
            return float((math.floor(moment) // self.every + 1) * self.every)
        start = datetime.fromtimestamp(math.floor(moment), ZoneInfo(self.timezone))
        return float(croniter(self.cron, start).get_next(float))

    def ticks_between(self, after: float, until: float, limit: int) -> list[float]:
        """The latest ``limit`` ticks in (``after``, ``until``], oldest first: bounded work whatever the span."""
        out: list[float] = []
        if self.every is not None:
            step = math.floor(until) // self.every * self.every
            while step > after and len(out) < limit:
                out.append(float(step))
                step -= self.every
        else:
            # croniter's get_prev is strictly before its start: start one second after ``until``.
            it = croniter(self.cron, datetime.fromtimestamp(math.floor(until) + 1, ZoneInfo(self.timezone)))
            while len(out) < limit:
                tick = float(it.get_prev(float))
                if tick <= after:
                    break
                out.append(tick)
        out.reverse()
        return out

    def words(self) -> str:
        """The rule in words, for the console: "every 30 s", "cron 0 3 * * * (Europe/Moscow)"."""
        if self.every is not None:
            return f"every {_duration(self.every)}"
        return f"cron {self.cron} ({self.timezone})"


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
