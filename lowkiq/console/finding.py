"""An id searched for in every worker (the header's box, api/v1/search), a bounded number of workers per request.

A worker holds an id in one shard, the id's own: looking there reads that shard three times (queued, busy, dead),
and the id's history is a walk of that shard's stream. A request looks in SEARCH_WORKERS workers at most, walking
SEARCH_HISTORY_ENTRIES history entries at most in all; it says which workers it searched and where the next
request goes on. A registry at its bound (500 workers of 4,096 shards) costs a request what 100 workers cost,
where the search of all of them once cost 5 to 8 s of the console's CPU.

Example::

    done = finding.search(console, "order-42")
    while done.following is not None:
        done = finding.search(console, "order-42", start=done.following)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import histories
from .histories import Shown
from .listing import BadInput

if TYPE_CHECKING:
    from . import Console, Found

# Workers one request looks in at most: 300 reads of one shard each, and their histories.
SEARCH_WORKERS = 100
# History entries one request walks at most, all workers together: 400 round trips of 500 entries.
SEARCH_HISTORY_ENTRIES = 200_000


@dataclass(frozen=True)
class Searched:
    """What one request found: the id's jobs and histories in the workers it searched, which are ``searched``
    workers from position ``start`` in the console's order (the dashboard's) of its ``workers``."""

    found: list[Found]
    remembered: list[Shown]
    start: int
    searched: int
    workers: int

    @property
    def following(self) -> int | None:
        """Where the next request starts (its ``from``); None when no worker is left."""
        end = self.start + self.searched
        return end if end < self.workers else None

    @property
    def whole(self) -> bool:
        """Whether this one request searched every worker."""
        return self.start == 0 and self.following is None

    def progress(self) -> dict[str, Any]:
        return {"from": self.start, "workers": self.searched, "of": self.workers, "continue": self.following}


def start_of(text: str) -> int:
    """A request's ``from`` (absent or empty: 0); BadInput saying what is wrong with it."""
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()) or len(text) > 6:  # "²" is a digit to str.isdigit, not to int()
        raise BadInput(f"from must be a worker's position, a whole number from 0, got {text[:40]!r}")
    return int(text)


def search(console: Console, job_id: str, *, start: int = 0, history_limit: int = histories.LIMIT,
           history_when_found: bool = True) -> Searched:
    """``job_id`` in the workers from position ``start`` on, within the budgets. ``history_when_found``:
    walk the histories also when a job was found (the API), else only when none was (the page)."""
    views = console.workers()
    if start > len(views):
        raise BadInput(f"from must be at most {len(views)}, the workers the console knows; got {start}")
    chosen = views[start:start + SEARCH_WORKERS]
    remembered: list[Shown] = []
    if history_when_found:
        remembered, walked = histories.search_within(console, job_id, chosen, limit=history_limit,
                                                     entries=SEARCH_HISTORY_ENTRIES)
        chosen = chosen[:walked]
        found = console.find(job_id, chosen)
    else:
        found = console.find(job_id, chosen)
        if not found:
            remembered, walked = histories.search_within(console, job_id, chosen, limit=history_limit,
                                                         entries=SEARCH_HISTORY_ENTRIES)
            chosen = chosen[:walked]
    return Searched(found, remembered, start, len(chosen), len(views))
