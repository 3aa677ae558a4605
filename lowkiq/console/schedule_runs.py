"""A schedule's last runs, read from its id's history (docs/history.md): when each tick was due, when it was
enqueued, when it was performed and how it ended, for the schedules page.

A schedule's jobs all have one id (the schedule's name, or its ``id=``), so its runs are that id's history
cut at each version enqueued. The walk is bounded: at most RUNS_EXAMINED entries of the id's shard per
schedule, and runs are read for the first RUNS_SCHEDULES schedules of a page; the page says both.

Example::

    runs = schedule_runs.last_runs(client, info)
    for run in runs.runs:
        print(run.tick, run.outcome)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store.id_history import Event, IdHistories
from ..store.keys import QueueKeys
from ..store.schedules import ScheduleInfo

# Runs a schedule shows at most.
RUNS_SHOWN = 5
# History entries of the id's shard walked per schedule at most: four round trips.
RUNS_EXAMINED = 2_000
# Schedules whose runs one page reads at most.
RUNS_SCHEDULES = 50
# Events read per schedule at most: a run is a few (enqueued, taken and performed, or failures).
EVENTS = 60
FINISHED = frozenset({"performed", "dead", "deleted", "deleted from the morgue"})


@dataclass
class Run:
    """One tick's job (or a "Run now"): due at ``tick``, enqueued at ``enqueued_at``, and how it went."""

    tick: float | None
    enqueued_at: float
    outcome: str = "queued"
    performed_at: float | None = None
    error: str | None = None
    merged: bool = False  # it joined a run still queued: both are performed together

    @property
    def failed(self) -> bool:
        return self.outcome.startswith("failed") or self.outcome == "dead"


@dataclass
class Runs:
    runs: list[Run] = field(default_factory=list)  # newest first
    examined: int = 0
    complete: bool = True  # the walk reached the oldest entry its shard keeps


def last_runs(client: Any, info: ScheduleInfo, *, load_error: Callable[[bytes], str] | None = None,
              count: int = RUNS_SHOWN) -> Runs:
    """The newest ``count`` runs of ``info``'s id, from at most RUNS_EXAMINED history entries."""
    keys = QueueKeys(info.queue_name, info.shards_count)
    histories = IdHistories(client, keys, **({"load_error": load_error} if load_error else {}))
    history = histories.of(info.id, limit=EVENTS, max_examined=RUNS_EXAMINED)
    return Runs(runs_of(list(reversed(history.events)))[:count], history.examined, history.complete)


def runs_of(events: list[Event]) -> list[Run]:
    """Runs from an id's events, oldest first in, newest first out."""
    runs: list[Run] = []
    running: list[Run] = []  # enqueued and not finished: a tick merged into a queued one finishes with it
    for event in events:
        if event.kind in ("enqueued", "merged"):
            run = Run(event.perform_in, event.at, merged=event.kind == "merged")
            runs.append(run)
            running.append(run)
            continue
        if not running:
            continue  # the start of its run is older than the walk reached
        outcome = _outcome(event)
        if outcome is None:
            continue
        for run in running:
            run.outcome = outcome
            if event.kind == "performed":
                run.performed_at = event.at
            if event.error:
                run.error = event.error
        if outcome in FINISHED:
            running = []
    runs.reverse()
    return runs


def _outcome(event: Event) -> str | None:
    kind = event.kind
    if kind == "taken":
        return "performing"
    if kind == "performed":
        return "performed"
    if kind == "failed":
        # a failure that kills the job is followed by its "morgued" event, which says "dead"
        later = ", retries later" if event.perform_in is not None else ""
        return f"failed (retry {event.retry_count}){later}"
    if kind in ("morgued", "killed"):
        return "dead"
    if kind == "restored":
        return "queued again"
    if kind == "deleted":
        return "deleted"
    if kind == "deleted_from_morgue":
        return "deleted from the morgue"
    if kind == "requeued":
        return "requeued"
    if kind == "performed_now":
        return "made due now"
    return None
