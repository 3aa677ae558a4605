"""How many ids a batch_size 1 worker's thread takes ahead (docs/take-ahead.md).

A take of K due ids costs Redis about what a take of one does: taken ahead, they are performed one per
``perform`` call, in order, and acknowledged together with the next take. How many is the worker's recent
perform time's share of a short window, so that the last id taken starts soon after its take (a version
that arrives for an id meanwhile waits for the next job of that id instead of merging into it).

The pace is the process's, per worker: every thread of the process performs the same worker's ids, so
a thread checking out a shard for the first time takes ahead at once.
"""

from __future__ import annotations

import threading

# The last id a take-ahead call takes starts within this window after its take, at the worker's pace.
WINDOW = 0.05
# The moving average's weight of the newest perform.
WEIGHT = 0.2


class Pace:
    """A worker's seconds per perform in this process, a moving average; None before its first."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds: float | None = None

    def record(self, seconds: float) -> None:
        # Threads race here: a lost update costs one sample of an average, nothing else.
        now = self.seconds
        self.seconds = seconds if now is None else now + WEIGHT * (seconds - now)

    def ahead(self, cap: int) -> int:
        """How many ids the next take may take ahead, 1..cap: 1 until a perform told the pace."""
        seconds = self.seconds
        if cap == 1 or seconds is None:
            return 1
        fits = cap if seconds <= 0 else int(WINDOW / seconds)
        return max(1, min(cap, fits))


_paces: dict[type, Pace] = {}
_lock = threading.Lock()


def pace_of(worker: type) -> Pace:
    """The process's pace of ``worker``'s performs, shared by its threads."""
    pace = _paces.get(worker)
    if pace is None:
        with _lock:
            pace = _paces.setdefault(worker, Pace())
    return pace
