"""Stale workers: known to the registry, served by no live server, and not registered for a while.

A worker renamed or removed from the app stays in the registry forever; the
dashboard marks it stale after ``LOWKIQ_WEB_STALE_AFTER`` seconds without a
registration (a server's start, a producer's first enqueue) while no live server
serves its queue, and offers to forget it. Forget checks the same rule again,
on the registry entry as it is now, and refuses a worker that is not stale: a
live server's worker, once forgotten, would vanish from registry-mode consoles,
the CLI, metrics and alerts until its processes restart. Forgetting a worker
whose queue still holds jobs is refused too: its jobs would vanish from the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask import url_for
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import Console, WorkerView, audit_log
from ..console.stale import entry_now, forget_unchanged, is_stale, queue_now, served_queues
from ..console.stale import stale_workers as stale_among
from ..console.terms import Member, WorkerInfo
from .actor import actor
from .blueprint import bp
from .formatting import duration, relative
from .http import flash_back
from .state import console, settings


def stale_workers(c: Console, rows: Sequence[tuple[WorkerView, Any]], members: Sequence[Member],
                  now: float) -> set[str]:
    """Names of the stale workers among ``rows``, after LOWKIQ_WEB_STALE_AFTER (lowkiq.console.stale)."""
    return stale_among(c, rows, members, now, settings().stale_after)


@bp.post("/workers/<worker>/forget")
def forget(worker: str) -> BaseResponse:
    c = console()
    message = _forget(c, c.worker(worker))
    return flash_back(url_for(".dashboard"), message)


def _forget(c: Console, view: WorkerView) -> str:
    """Forget a stale worker whose queue is empty; else change nothing and say why (the flash)."""
    refused = f"{view.name} was not forgotten:"
    if c.source != "registry":
        return f"{refused} this console shows the workers its app defines, and those are never stale."
    # The entry as it is now, not as the console's registry cache last read it: a server may have started.
    entry = entry_now(c, view.name)
    if entry is None:
        return f"{view.name} was already forgotten."
    raw, info = entry
    if not isinstance(info, WorkerInfo):
        return f"{refused} its registry entry changed and cannot be used: {info.problem}"
    now = c.clock()
    m, members = queue_now(c, info, now)
    served = served_queues(members)
    after = settings().stale_after
    if not is_stale(info, served, now, after):
        if info.queue_name in served:
            serving = sorted({f"{s.host}:{s.pid}" for s in members if info.queue_name in dict(s.queues)})
            shown = ", ".join(serving[:3]) + (f" and {len(serving) - 3} more" if len(serving) > 3 else "")
            return f"{refused} it is not stale: a live server serves its queue ({shown})."
        # relative(): a server whose host clock runs ahead registers "in 5 min", not "5 min ago".
        return (f"{refused} it is not stale: it was registered {relative(info.registered_at, now)}, "
                f"and LOWKIQ_WEB_STALE_AFTER is {duration(after)}.")
    held = m.length + m.busy + m.morgue_length
    if held:
        return (f"{refused} its queue still holds {held:,} jobs "
                f"({m.length:,} queued, {m.busy:,} busy, {m.morgue_length:,} dead).")
    # Only the entry just checked: one a server wrote since (it started meanwhile) stays.
    if not forget_unchanged(c, view.name, raw):
        return f"{refused} its registry entry changed meanwhile (registered again, or forgotten); reload and see."
    audit_log.record(c, who=actor(), source="console", action="forget", worker=view.name, count=0,
                     scope="registry entry")
    return f"Forgot worker {view.name}."
