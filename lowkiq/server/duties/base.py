"""The keeper's periodic duties: small jobs it runs beside its leases, each guarded on its own.

The keeper's own loop beats the membership heartbeat, acts on the assignment and
renews leases: that is what keeps a process holding and serving its shards, and it
runs first on every beat. Everything else it does now and then (enqueue due
schedule ticks, read replica counts, sample the queues' per-minute totals, trim
each id's history) is a ``Duty``: when it is due, what it does. ``Duties`` runs the
due ones after the leases are seen to, so a duty that raises on every run is
reported (the log with its traceback, a ``duty_failed`` event, the server's
heartbeat record that the console's Servers page reads) and backs off, and never
stops the other duties, the leases, or the threads performing jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from ... import log_format

log = logging.getLogger("lowkiq.server")

# The longest a failing duty waits before its next try: a broken one is retried (and reported) at least this often.
MAX_BACKOFF = 60.0
# Characters of a failing duty's error kept for the console: the log has the whole traceback.
ERROR_CHARS = 300

# A lost or refused connection is an outage of the whole process, not a fault of the duty that met it: the
# keeper's outage handling deals with it (reconnects, tells subscribers) once every due duty had its turn.
OUTAGE_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


class Duty:
    """One periodic job of the keeper: ``name``, every ``every`` seconds (a monotonic clock), ``run()``.

    ``run`` may raise: the duty is then reported and retried with a growing back-off. ``every`` 0 runs it
    on every beat."""

    name: str = "duty"
    every: float = 0.0

    def run(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Failure:
    """A duty that failed on its last run: what it raised, since when (unix time) and how many runs in a row."""

    duty: str
    error: str
    since: float
    failures: int

    def as_json(self) -> dict[str, object]:
        return {"duty": self.duty, "error": self.error, "since": self.since, "failures": self.failures}


class Duties:
    """Runs the due duties, each guarded; ``failing()`` lists the ones whose last run raised."""

    def __init__(self, duties: Sequence[Duty], *, report: Callable[[Failure], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.duties = list(duties)
        self.report = report
        self.clock = clock
        self.wall = wall
        self.next_at = {duty.name: 0.0 for duty in self.duties}  # all due on the first beat
        self._failures: dict[str, Failure] = {}

    def run_due(self) -> None:
        """Run every due duty; an outage met by one is raised after all had their turn."""
        outage: BaseException | None = None
        for duty in self.duties:
            if self.clock() < self.next_at[duty.name]:
                continue
            try:
                duty.run()
            except OUTAGE_ERRORS as exc:
                self.next_at[duty.name] = self.clock()  # retried on the next beat, whenever Redis answers
                outage = outage or exc
                continue
            except Exception as exc:
                self._failed(duty, exc)
                continue
            self.next_at[duty.name] = self.clock() + duty.every
            self._recovered(duty)
        if outage is not None:
            raise outage

    def run_now(self, duty: Duty) -> None:
        """Run one duty outside its cadence (e.g. a tick that comes due between beats), guarded the same way."""
        if self.clock() < self.next_at[duty.name] and duty.name in self._failures:
            return  # backing off: its next try is at its own time
        try:
            duty.run()
        except OUTAGE_ERRORS:
            raise
        except Exception as exc:
            self._failed(duty, exc)
        else:
            self._recovered(duty)

    def failing(self) -> list[Failure]:
        return sorted(self._failures.values(), key=lambda f: f.duty)

    def _recovered(self, duty: Duty) -> None:
        if self._failures.pop(duty.name, None) is not None:
            log.info("keeper: duty %s runs again", duty.name, extra=log_format.fields(duty=duty.name))

    def _failed(self, duty: Duty, exc: Exception) -> None:
        previous = self._failures.get(duty.name)
        count = 1 if previous is None else previous.failures + 1
        error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        failure = Failure(duty.name, error, previous.since if previous is not None else self.wall(), count)
        self._failures[duty.name] = failure
        backoff = min(MAX_BACKOFF, max(duty.every, 1.0) * 2 ** min(count - 1, 16))
        self.next_at[duty.name] = self.clock() + backoff
        # The whole traceback the first time and then now and then: a duty failing every beat must not flood the log.
        if count == 1 or count % 10 == 0 or error != (previous.error if previous else None):
            log.error("keeper: duty %s failed (%d in a row; next try in %.0f s); the server keeps holding and "
                      "serving its shards", duty.name, count, backoff, exc_info=exc,
                      extra=log_format.fields(duty=duty.name, error=error, failures=count))
        if self.report is not None:
            self.report(failure)
