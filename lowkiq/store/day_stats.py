"""Wait and run times per worker and UTC day (qless's queue stats), kept 30 days.

For each job a server performs it counts two times: its **wait**, from when it was due (its perform_in) to
when its perform started, and its **run**, from that start to the perform's end (a batch's jobs each count the
batch's time). Each is kept as a count, a sum and a sum of squares (mean and standard deviation follow) and a
histogram over fixed buckets (``BUCKETS``), in one hash per worker and day (``keys.day_stats_hash``), the day
the perform ended, in UTC.

Nothing of it is on a script's path: a server adds each batch to a per-process ``Tally`` (in memory) and its
keeper flushes the tally about once a second, one pipelined round trip of HINCRBY/HINCRBYFLOAT and EXPIREAT
per worker and day it saw. A process killed with -9 loses at most the last second of its counts.

Example::

    stats = day_stats.read(client, "OrdersWorker", "2026-11-29")
    stats.run.count, stats.run.mean, stats.run.buckets
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transport import Transport
from .keys import day_stats_hash

# Upper bounds of the buckets, in seconds; the last bucket holds everything above the last bound.
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
                              900.0, 3600.0)
KINDS = ("wait", "run")
KEEP_DAYS = 30
DAY_SECONDS = 86_400


def bucket_labels() -> list[str]:
    """The buckets for people: "≤ 5 ms", ..., "> 1 h"."""
    return [f"≤ {_short(b)}" for b in BUCKETS] + [f"> {_short(BUCKETS[-1])}"]


def _short(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g} ms"
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def day_of(unix_time: float) -> str:
    """The UTC day of ``unix_time``, as ``YYYY-MM-DD``."""
    return dt.datetime.fromtimestamp(unix_time, dt.timezone.utc).strftime("%Y-%m-%d")


def parse_day(text: str) -> str:
    """``text`` if it is a day ``YYYY-MM-DD``, else ValueError naming ``day``."""
    try:
        parsed = dt.datetime.strptime(text, "%Y-%m-%d")
    except (TypeError, ValueError):
        raise ValueError(f"day must be a UTC date as YYYY-MM-DD, got {str(text)[:40]!r}") from None
    if parsed.strftime("%Y-%m-%d") != text:
        raise ValueError(f"day must be a UTC date as YYYY-MM-DD, got {text[:40]!r}")
    return text


def _bucket(seconds: float) -> int:
    return bisect.bisect_left(BUCKETS, seconds)


@dataclass
class _Sums:
    count: int = 0
    total: float = 0.0
    squares: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))

    def add(self, seconds: float, times: int = 1) -> None:
        seconds = max(0.0, seconds)
        self.count += times
        self.total += seconds * times
        self.squares += seconds * seconds * times
        self.buckets[_bucket(seconds)] += times


class Tally:
    """A process's counts not yet written, by (worker, day): shared by its threads, flushed by its keeper.

    ``record`` runs once per batch on a server thread's hot path: the day is formatted once per day, not per
    batch, and the sums are plain list slots."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._days: dict[tuple[str, str], dict[str, _Sums]] = {}
        self._day = ""
        self._day_from = self._day_until = 0.0  # the unix times ``_day`` spans

    def record(self, worker: str, due: Iterable[float], ended: float, seconds: float) -> None:
        """One batch of ``worker``: its jobs' perform_ins (``due``), when its perform ended (unix time) and how
        long it ran."""
        started = ended - seconds
        with self._lock:
            if not self._day_from <= ended < self._day_until:
                self._day = day_of(ended)
                self._day_from = float(_day_start(self._day))
                self._day_until = self._day_from + DAY_SECONDS
            key = (worker, self._day)
            sums = self._days.get(key)
            if sums is None:
                sums = self._days[key] = {kind: _Sums() for kind in KINDS}
            wait = sums["wait"]
            n = 0
            for perform_in in due:
                waited = started - perform_in
                if waited < 0.0:
                    waited = 0.0
                wait.count += 1
                wait.total += waited
                wait.squares += waited * waited
                wait.buckets[bisect.bisect_left(BUCKETS, waited)] += 1
                n += 1
            if n:
                sums["run"].add(seconds, n)

    def take(self) -> dict[tuple[str, str], dict[str, _Sums]]:
        with self._lock:
            days, self._days = self._days, {}
        return days

    def put_back(self, days: dict[tuple[str, str], dict[str, _Sums]]) -> None:
        """Counts a flush could not write: kept for the next one."""
        with self._lock:
            for key, sums in days.items():
                mine = self._days.setdefault(key, {kind: _Sums() for kind in KINDS})
                for kind, s in sums.items():
                    m = mine[kind]
                    m.count += s.count
                    m.total += s.total
                    m.squares += s.squares
                    m.buckets = [a + b for a, b in zip(m.buckets, s.buckets, strict=True)]

    def flush(self, client: Transport) -> int:
        """Write what was counted since the last flush: one round trip (none when nothing was). Returns the hashes
        written. On an error the counts are kept for the next flush, and the error raised."""
        days = self.take()
        if not days:
            return 0
        commands: list[tuple[str, tuple[Any, ...]]] = []
        for (worker, day), sums in days.items():
            key = day_stats_hash(worker, day)
            for kind, s in sums.items():
                if not s.count:
                    continue
                commands += [(key, ("HINCRBY", key, f"{kind}:count", s.count)),
                             (key, ("HINCRBYFLOAT", key, f"{kind}:sum", repr(s.total))),
                             (key, ("HINCRBYFLOAT", key, f"{kind}:squares", repr(s.squares)))]
                commands += [(key, ("HINCRBY", key, f"{kind}:b{i}", n)) for i, n in enumerate(s.buckets) if n]
            expire_at = _day_start(day) + (KEEP_DAYS + 1) * DAY_SECONDS
            commands.append((key, ("EXPIREAT", key, expire_at)))
        try:
            client.pipeline_commands(commands)
        except Exception:
            self.put_back(days)
            raise
        return len(days)


def _day_start(day: str) -> int:
    return int(dt.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp())


@dataclass(frozen=True)
class Measure:
    """One kind of time (wait or run) of one day: how many, mean and standard deviation (seconds), and the
    count per bucket (``BUCKETS``, then one more for anything longer)."""

    count: int
    mean: float
    stddev: float
    buckets: list[int]

    def as_json(self) -> dict[str, Any]:
        return {"count": self.count, "mean": round(self.mean, 6), "stddev": round(self.stddev, 6),
                "histogram": [{"le": bound, "count": n} for bound, n in
                              zip([*BUCKETS, None], self.buckets, strict=True)]}


@dataclass(frozen=True)
class DayStats:
    worker: str
    day: str
    wait: Measure
    run: Measure

    def as_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "day": self.day, "wait": self.wait.as_json(), "run": self.run.as_json()}


def read(client: Transport, worker: str, day: str) -> DayStats:
    """``worker``'s stats of ``day`` (``YYYY-MM-DD``, UTC): zeros for a day nothing was recorded."""
    key = day_stats_hash(worker, parse_day(day))
    [raw] = client.pipeline_commands([(key, ("HGETALL", key))])
    fields = _fields(raw)
    return DayStats(worker, day, *(_measure(fields, kind) for kind in KINDS))


def _measure(fields: dict[str, str], kind: str) -> Measure:
    count = int(fields.get(f"{kind}:count", 0))
    total = float(fields.get(f"{kind}:sum", 0))
    squares = float(fields.get(f"{kind}:squares", 0))
    buckets = [int(fields.get(f"{kind}:b{i}", 0)) for i in range(len(BUCKETS) + 1)]
    if not count:
        return Measure(0, 0.0, 0.0, buckets)
    mean = total / count
    return Measure(count, mean, math.sqrt(max(0.0, squares / count - mean * mean)), buckets)


def _fields(raw: Any) -> dict[str, str]:
    if not raw:
        return {}
    pairs: Sequence[tuple[Any, Any]] = (list(raw.items()) if isinstance(raw, dict)
                                        else list(zip(raw[::2], raw[1::2], strict=True)))
    return {_text(k): _text(v) for k, v in pairs}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
