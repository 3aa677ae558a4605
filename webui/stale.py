"""Stale workers: known to the registry, served by no live server, and not registered for a while.

A worker renamed or removed from the app stays in the registry forever; the
dashboard marks it stale after ``LOWKIQ_WEB_STALE_AFTER`` seconds without a
registration (a server's start, a producer's first enqueue) while no live server
serves its queue, and offers to forget it. Forgetting a worker whose queue
still holds jobs is refused: its jobs would vanish from the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask import redirect, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from .. import audit, registry
from ..membership import Member
from .actor import actor
from .blueprint import bp
from .console import Console, WorkerView
from .state import console, settings
from .views import FLASH_COOKIE


def stale_workers(c: Console, rows: Sequence[tuple[WorkerView, Any]], members: Sequence[Member],
                  now: float) -> set[str]:
    """Names of the stale workers among ``rows``; none for an app-configured console (its code defines them)."""
    if c.source != "registry":
        return set()
    served = {queue for m in members for queue, _ in m.queues}
    after = settings().stale_after
    return {view.name for view, _ in rows
            if view.info.queue_name not in served and now - view.info.registered_at > after}


@bp.post("/workers/<worker>/forget")
def forget(worker: str) -> BaseResponse:
    c = console()
    view = c.worker(worker)
    [(_, m)] = c.metrics([view])
    held = m.length + m.busy + m.morgue_length
    if held:
        message = (f"{view.name} was not forgotten: its queue still holds {held:,} jobs "
                   f"({m.length:,} queued, {m.busy:,} busy, {m.morgue_length:,} dead).")
    else:
        forgotten = registry.forget(c.client, [view.name])
        audit.record(c.client, who=actor(), source="console", action="forget", worker=view.name, count=0,
                     scope="registry entry")
        message = f"Forgot worker {view.name}." if forgotten else f"{view.name} was already forgotten."
    response = redirect(url_for(".dashboard"), code=303)
    response.set_cookie(FLASH_COOKIE, message, path=url_for(".dashboard"), max_age=60, httponly=True,
                        samesite="Strict")
    return response
