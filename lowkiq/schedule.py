"""Recurring schedules: a job enqueued into a worker's queue at every tick of a rule.

A ``Schedule`` is a value checked when it is built and again by ``lowkiq.configure``
(its worker must be one of the configured workers). Its ticks are instants (unix
seconds): ``every=N`` ticks at the multiples of N seconds since the epoch, ``cron=``
at the moments the cron expression names in ``timezone``, so a daylight-saving
change moves them with the wall clock (croniter decides the details: a wall time
that does not exist is skipped, one that happens twice ticks twice).

Example::

    lowkiq.configure(workers=[ReportWorker, SyncWorker], schedules=[
        lowkiq.Schedule("nightly-report", ReportWorker, cron="0 3 * * *", timezone="Europe/Moscow"),
        lowkiq.Schedule("sync", SyncWorker, every=30, payload={"full": False}),
    ])
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter  # type: ignore[import-untyped]  # croniter ships no type hints

from .errors import ConfigurationError

# Declared below the worker and the store, which read them; importable from here too.
from .spec import CATCH_UP as CATCH_UP
from .spec import Rule as Rule
from .store.keys import validate_queue_name

if TYPE_CHECKING:
    from .worker import Worker

# Missed ticks a schedule with catch_up="all" enqueues at most after a downtime.
CATCH_UP_LIMIT = 100


@dataclass(frozen=True, eq=False)
class Schedule:
    """One recurring job: ``Schedule(name, worker, cron=... | every=..., timezone="UTC", payload={}, id=None,
    catch_up="last")``. Invalid values raise ``ValueError``/``TypeError`` naming the schedule."""

    name: str
    worker: type[Worker]
    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"
    payload: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    catch_up: str = "last"

    def __post_init__(self) -> None:
        from .worker import Worker  # at call time: config imports schedules, and worker.py reaches config

        if not isinstance(self.name, str):
            raise TypeError(f"a schedule's name must be a string, got {self.name!r}")
        validate_queue_name(self.name, "schedule name")
        where = f"schedule {self.name!r}"
        if not (isinstance(self.worker, type) and issubclass(self.worker, Worker)):
            raise TypeError(f"{where}: worker must be a lowkiq.Worker subclass, got {self.worker!r}")
        if (self.cron is None) == (self.every is None):
            raise ValueError(f"{where}: give exactly one of cron= or every=")
        if self.every is not None:
            every = self.every
            if isinstance(every, bool) or not isinstance(every, (int, float)) or not math.isfinite(every) or every < 1:
                raise ValueError(f"{where}: every must be a number of seconds >= 1, got {every!r}")
            if every != int(every):
                raise ValueError(f"{where}: every must be a whole number of seconds, got {every!r}")
        if not isinstance(self.timezone, str) or not self.timezone:
            raise ValueError(f"{where}: timezone must be an IANA zone name such as 'Europe/Moscow', "
                             f"got {self.timezone!r}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"{where}: unknown time zone {self.timezone!r}") from exc
        if self.cron is not None and (not isinstance(self.cron, str) or not croniter.is_valid(self.cron)):
            raise ValueError(f"{where}: bad cron expression {self.cron!r} (e.g. '0 3 * * *': minute hour "
                             f"day-of-month month day-of-week)")
        if not isinstance(self.payload, Mapping):
            raise TypeError(f"{where}: payload must be a dict, got {type(self.payload).__name__}")
        if "scheduled_at" in self.payload:
            raise ValueError(f"{where}: payload must not hold 'scheduled_at': each job gets its tick there")
        if self.id is not None:
            if isinstance(self.id, bool) or not isinstance(self.id, (str, int)) or self.id == "":
                raise ValueError(f"{where}: id must be a non-empty string, got {self.id!r}")
            object.__setattr__(self, "id", str(self.id))
        if self.catch_up not in CATCH_UP:
            raise ValueError(f"{where}: catch_up must be one of {', '.join(CATCH_UP)}, got {self.catch_up!r}")

    @property
    def job_id(self) -> str:
        """The id of the jobs this schedule enqueues: ``id=``, else its name."""
        return self.id if self.id is not None else self.name

    @property
    def rule(self) -> Rule:
        return Rule(self.cron, None if self.every is None else int(self.every), self.timezone)

    def next_after(self, moment: float) -> float:
        """The first tick strictly after ``moment`` (unix seconds)."""
        return self.rule.next_after(moment)

    def ticks_between(self, after: float, until: float, limit: int) -> list[float]:
        """The latest ``limit`` ticks in (``after``, ``until``], oldest first."""
        return self.rule.ticks_between(after, until, limit)

    def payload_for(self, tick: float) -> dict[str, Any]:
        """What a tick's job carries: its tick as ``scheduled_at``, then the schedule's payload."""
        return {"scheduled_at": tick, **self.payload}

    def definition(self) -> dict[str, Any]:
        """What the registry keeps for a console that does not import the app."""
        return {"name": self.name, "worker": self.worker.__name__, "queue_name": self.worker.queue_name,
                "shards_count": self.worker.shards_count, "cron": self.cron,
                "every": None if self.every is None else int(self.every), "timezone": self.timezone,
                "id": self.job_id, "catch_up": self.catch_up, "payload": json.loads(json.dumps(dict(self.payload),
                                                                                                default=str))}


def check_fires(schedule: Schedule) -> None:
    """Refuse a cron rule that names no moment at all (``0 0 30 2 *``, 30 February): croniter accepts its
    syntax, and a server would look for its next tick in vain on every beat."""
    if schedule.cron is None:
        return
    now = time.time()
    try:
        schedule.next_after(now)
        schedule.ticks_between(now - 1, now, 1)  # the search backwards, which catch-up runs
    except CroniterError as exc:
        raise ConfigurationError(
            f"schedule {schedule.name!r}: the cron rule {schedule.cron!r} never fires (no date matches it, e.g. "
            f"30 February or 31 April): fix its day-of-month and month") from exc


def validate_all(schedules: tuple[Any, ...], workers: tuple[type[Worker], ...]) -> None:
    """What ``configure`` checks: Schedules only, each naming a configured worker, names unique, each rule
    naming a moment that exists."""
    names: set[str] = set()
    ids: dict[tuple[str, str], str] = {}
    for schedule in schedules:
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedules must be lowkiq.Schedule objects, got {schedule!r}")
        check_fires(schedule)
        if schedule.worker not in workers:
            raise ValueError(f"schedule {schedule.name!r}: unknown worker {schedule.worker.__name__}: "
                             f"add it to configure(workers=[...])")
        if schedule.name in names:
            raise ValueError(f"two schedules are named {schedule.name!r}")
        names.add(schedule.name)
        key = (schedule.worker.queue_name, schedule.job_id)
        if key in ids:
            # One high-water mark per schedule, one id per job: two schedules on one id would merge
            # their ticks into one job and fire at both rules' ticks.
            raise ValueError(f"schedules {ids[key]!r} and {schedule.name!r} enqueue the same id {schedule.job_id!r} "
                             f"into {schedule.worker.__name__}")
        ids[key] = schedule.name
