"""Pausing and resuming a worker's queue, for the console's pages, the API and the ops CLI.

Servers stop taking the queue's jobs within a heartbeat (``lowkiq.store.pausing``); producers keep
enqueueing. The change is audited by the store's script, with who asked and from where.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store import pausing

if TYPE_CHECKING:
    from . import Console, WorkerView

PAUSE, RESUME = pausing.PAUSE, pausing.RESUME


def set_paused(c: Console, worker: str, verb: str, *, who: str, source: str) -> tuple[WorkerView, bool]:
    """Pause (``verb`` PAUSE) or resume the worker named ``worker``: its view, and whether anything changed
    (False when it was paused, or not paused, already). UnknownWorker for a worker the console does not know."""
    view = c.worker(worker)
    change = pausing.pause if verb == PAUSE else pausing.resume
    return view, change(c.client, view.info.queue_name, worker=view.name, who=who, source=source)
