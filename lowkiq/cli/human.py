"""What the operator commands print for people: times in local time (``--utc``: UTC), payloads as
readable text, numbers with separators, aligned tables, and texts of many lines (tracebacks) on lines
of their own. ``--json`` never passes here: scripts get the data as the commands return it.

Everything shown is escaped (``visible``): an error or a payload must not move the cursor,
recolour the terminal or forge a line of output.

    style = Style(utc=False)
    style.when(1764000000.0)     # '2025-11-24 17:00:00 CET' where the local zone is CET
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ..log_format import visible

# A score in this range reads as a time (the default score is when the job was enqueued);
# any other score is a number the app chose, and shown as one.
_PLAUSIBLE_TIMES = (978_307_200.0, 4_102_444_800.0)  # 2001-01-01 .. 2100-01-01 UTC
# A table cell longer than this is cut: a row stays one line on a terminal.
CELL = 60
INDENT = "  "


@dataclass(frozen=True)
class Style:
    """How times are shown: in the local zone (the default) or in UTC (``--utc``)."""

    utc: bool = False

    def when(self, at: float | None, *, precise: bool = False) -> str:
        """``2026-11-24 03:00:05 CET``: ISO-like, with the zone (a name when it has one, else its offset)."""
        if at is None:
            return "-"
        try:
            moment = datetime.fromtimestamp(at, timezone.utc)
        except (OverflowError, OSError, ValueError):  # inf, or past what datetime holds
            return _number(at)
        if not self.utc:
            moment = moment.astimezone()
        text = moment.strftime("%Y-%m-%d %H:%M:%S")
        if precise:
            text += f".{moment.microsecond // 1000:03d}"
        return f"{text} {_zone(moment)}"

    def score(self, score: float) -> str:
        """A payload's score: as a time when it reads as one (the default score is the enqueue time)."""
        if _PLAUSIBLE_TIMES[0] <= score < _PLAUSIBLE_TIMES[1]:
            return self.when(score, precise=True)
        return _number(score)


def _zone(moment: datetime) -> str:
    name = moment.tzname() or ""
    if name.isalpha():
        return name
    offset = moment.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def count(n: int) -> str:
    return f"{n:,}"


def plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def duration(seconds: float) -> str:
    """``0 s``, ``4.2 s``, ``3 min 20 s``, ``2 h 5 min``, ``3 d 4 h``: a lag as people say it."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = int(seconds)
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if whole >= size:
            rest = (whole % size) // smaller_size
            return f"{whole // size} {unit}" + (f" {rest} {smaller}" if rest else "")
    return f"{whole} s"  # pragma: no cover - seconds >= 60 is a minute at least


def payload(value: Any) -> str:
    """A payload as JSON, with its letters as they are (``ü``, not ``\\u00fc``) and control characters escaped."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure from a custom load_payload
        text = repr(value)
    return visible(text)


def cell(value: Any, *, clip: bool = True) -> str:
    text = visible(value if isinstance(value, str) else str(value))
    return text if not clip or len(text) <= CELL else text[: CELL - 3] + "..."


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Iterable[str] = (),
          last_unclipped: bool = False) -> str:
    """Aligned columns under their headers; the columns named in ``right`` (numbers) align right.
    Cells are escaped and cut at ``CELL`` characters, the last column too unless ``last_unclipped``."""
    aligned = set(right)
    shown = [[cell(v, clip=not (last_unclipped and i == len(headers) - 1)) for i, v in enumerate(row)] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in shown)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if h in aligned else c.ljust(w) for c, w, h in zip(cells, widths, headers)]
        return (INDENT + "  ".join(parts)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in shown)])


def block(text: str, indent: str = INDENT * 2) -> str:
    """A text of many lines (a traceback), each line escaped and indented: on lines of its own, yet
    never a line that could pass for the command's own output."""
    return "\n".join(indent + visible(line) for line in text.rstrip("\n").split("\n"))


def fields(pairs: Iterable[tuple[str, str]], indent: str = INDENT) -> str:
    """``name  value`` lines, the values aligned."""
    pairs = list(pairs)
    width = max((len(name) for name, _ in pairs), default=0)
    return "\n".join(f"{indent}{name.ljust(width)}  {value}".rstrip() for name, value in pairs)
