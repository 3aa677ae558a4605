"""Each queue's totals, minute by minute, kept in Redis for the console's history charts.

One stream per queue in the ``{lowkiq}`` slot, one entry per minute of Redis time
(processed and failed totals, lag, length, dead), at most ``KEEP`` entries (two
days: about 100 KB per queue). Servers sample the queues they serve once a minute;
the console samples what it has just read whenever its dashboard is open, so a
queue nobody serves still shows its lag growing. A minute is claimed per queue
before it is written, so however many processes sample, each minute is read and
written once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..transport import as_transport
from . import lua
from .keys import PREFIX
from .metrics import QueueMetrics

# Two days of minutes.
KEEP = 2 * 24 * 60
# Samples read per queue for a chart or the API at most: a chart is 600 px wide.
MAX_POINTS = 72
FIELDS = ("processed", "failed", "lag", "length", "dead")


@dataclass(frozen=True)
class MinuteTotalsKeys:
    """The claims hash and the streams of ``queues``: all in the {lowkiq} slot."""

    queues: tuple[str, ...] = ()

    @property
    def claims_hash(self) -> str:
        """queue name -> the last minute (ms) claimed for sampling it."""
        return f"{PREFIX}:{{lowkiq}}:history_claims"

    @staticmethod
    def stream(queue: str) -> str:
        """Entries "<minute ms>-0": at (ms of Redis time), processed, failed, lag, length, dead."""
        return f"{PREFIX}:{{lowkiq}}:history:{queue}"

    def all(self) -> list[str]:
        return [self.claims_hash, *(self.stream(q) for q in self.queues)]


@dataclass(frozen=True)
class Point:
    """A queue's totals at one minute."""

    minute: float  # unix time of the minute's start
    at: float  # unix time the totals were read
    processed: int
    failed: int
    lag: float
    length: int
    dead: int


def claim(client: Any, queues: Sequence[str]) -> tuple[int, list[str]]:
    """(this minute in ms, the queues it is for this caller to sample now)."""
    minute, claimed = lua.run(client, "history", MinuteTotalsKeys(), ("claim", *queues))
    return int(minute), [q.decode() if isinstance(q, bytes) else str(q) for q in claimed]


def write(client: Any, measured: Iterable[QueueMetrics], minute_ms: int | None = None) -> int:
    """Record ``measured`` for ``minute_ms`` (claimed before), or for this minute when not sampled yet."""
    rows = list(measured)
    if not rows:
        return 0
    args: list[Any] = ["write", "now" if minute_ms is None else minute_ms, KEEP, len(FIELDS)]
    for m in rows:
        args += [m.queue_name, "processed", m.processed, "failed", m.failed, "lag", repr(round(m.lag, 3)),
                 "length", m.length, "dead", m.morgue_length]
    return int(lua.run(client, "history", MinuteTotalsKeys(tuple(m.queue_name for m in rows)), args))


def read(client: Any, queues: Sequence[str], minutes: int, now: float, points: int = MAX_POINTS) -> dict[str, list[Point]]:
    """Each queue's totals over the last ``minutes`` (and the one before, for the first rate), oldest first,
    in one round trip.

    Every minute when they fit in ``points``; else about ``points`` of them, evenly spaced: the totals are
    cumulative, so the rate between two samples is exact over that span, and reading 48 hours of 50 queues
    costs what one hour costs (a page does not need 2,880 points to be 600 pixels wide).
    """
    commands: list[tuple[str, tuple[Any, ...]]] = []
    if minutes + 1 <= points:
        for queue in queues:
            key = MinuteTotalsKeys.stream(queue)
            commands.append((key, ("XREVRANGE", key, "+", "-", "COUNT", minutes + 1)))
        replies = as_transport(client).pipeline_commands(commands)
        return {queue: [_point(entry) for entry in reversed(entries)] for queue, entries in zip(queues, replies)}
    step = -(-minutes // points)  # minutes between samples, rounded up
    last = int(now // 60) * 60
    boundaries = [(last - k * step * 60) * 1000 for k in range(minutes // step + 1)]
    start_ms = (last - minutes * 60) * 1000
    for queue in queues:
        key = MinuteTotalsKeys.stream(queue)
        # The newest entry at or before each boundary: the totals as of then. And the newest entry, and the
        # oldest of the window: a history younger than one step between boundaries still gives a rate.
        commands += [(key, ("XREVRANGE", key, f"{boundary}-0", "-", "COUNT", 1)) for boundary in boundaries]
        commands += [(key, ("XREVRANGE", key, "+", "-", "COUNT", 1)), (key, ("XRANGE", key, start_ms, "+", "COUNT", 1))]
    replies = as_transport(client).pipeline_commands(commands)
    out = {}
    per_queue = len(boundaries) + 2
    for n, queue in enumerate(queues):
        seen: dict[Any, Point] = {}
        for entries in replies[n * per_queue:(n + 1) * per_queue]:
            for entry in entries:
                seen.setdefault(entry[0], _point(entry))  # a gap repeats an entry: keep it once
        out[queue] = sorted(seen.values(), key=lambda p: p.minute)
    return out


def _point(entry: Any) -> Point:
    """A point from a raw XRANGE entry: [id, [field, value, ...]] (a dict of fields in RESP3)."""
    entry_id, data = entry
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    pairs = data.items() if isinstance(data, dict) else zip(data[0::2], data[1::2])
    values = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in pairs}

    def number(name: str) -> float:
        try:
            return float(values.get(name, 0))
        except (TypeError, ValueError):
            return 0.0

    return Point(int(text.split("-")[0]) / 1000, number("at") / 1000, int(number("processed")), int(number("failed")),
                 number("lag"), int(number("length")), int(number("dead")))


@dataclass(frozen=True)
class Minute:
    """Jobs processed and failed per minute over the ``span`` minutes up to ``minute``, and the lag then.

    Over an hour ``span`` is 1; a sampled window's rates cover several minutes each (jobs = rate x span).
    """

    minute: float  # unix time of the minute's start
    processed: float
    failed: float
    lag: float
    span: float = 1.0


def per_minute(points: Sequence[Point]) -> list[Minute]:
    """Per-minute rates from consecutive totals; a gap (no sample for some minutes) is averaged over."""
    out = []
    for a, b in itertools.pairwise(points):
        seconds = b.at - a.at
        if seconds <= 0:
            continue
        scale = 60.0 / seconds
        # Totals only go down if someone flushed Redis: count that as zero.
        out.append(Minute(b.minute, max(0, b.processed - a.processed) * scale, max(0, b.failed - a.failed) * scale,
                          b.lag, seconds / 60))
    return out


def combine(series: Iterable[Sequence[Minute]]) -> list[Minute]:
    """Several queues' minutes as one: counts summed, the largest lag."""
    by_minute: dict[float, list[Minute]] = {}
    for minutes in series:
        for m in minutes:
            by_minute.setdefault(m.minute, []).append(m)
    return [Minute(minute, sum(m.processed for m in ms), sum(m.failed for m in ms), max(m.lag for m in ms),
                   max(m.span for m in ms))
            for minute, ms in sorted(by_minute.items())]
