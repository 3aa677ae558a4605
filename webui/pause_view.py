"""Pausing a worker's queue from the console and the API.

Servers stop taking the queue's jobs within a heartbeat (``lowkiq.console.worker_pause``);
producers keep enqueueing. The worker's pages learn the state from the tab
counts they load anyway (one read of every shard and the paused queues), so a
listing stays two round trips.
"""

from __future__ import annotations

from flask import Response
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import WorkerView
from ..console.worker_pause import PAUSE, RESUME, set_paused
from . import actor
from .blueprint import bp
from .http import back as back_to
from .http import flash_back, no_parameters, reply
from .state import console


def _set(worker: str, verb: str, source: str) -> tuple[WorkerView, bool]:
    return set_paused(console(), worker, verb, who=actor.actor(), source=source)


def _page_action(worker: str, verb: str) -> BaseResponse:
    view = console().worker(worker)
    back = back_to(view)  # checked before acting: a bad one must not leave the action done and a 400
    view, changed = _set(worker, verb, "console")
    if verb == PAUSE:
        message = (f"Paused {view.name}: servers stop taking its jobs within a second; enqueueing goes on."
                   if changed else f"{view.name} was paused already.")
    else:
        message = f"Resumed {view.name}." if changed else f"{view.name} was not paused."
    return flash_back(back, message)


@bp.post("/workers/<worker>/pause")
def pause(worker: str) -> BaseResponse:
    return _page_action(worker, PAUSE)


@bp.post("/workers/<worker>/resume")
def resume(worker: str) -> BaseResponse:
    return _page_action(worker, RESUME)


@bp.post("/api/v1/workers/<worker>/pause")
def api_pause(worker: str) -> Response:
    no_parameters("pause")
    _, changed = _set(worker, PAUSE, "api")
    return reply({"paused": True, "changed": changed})


@bp.post("/api/v1/workers/<worker>/resume")
def api_resume(worker: str) -> Response:
    no_parameters("resume")
    _, changed = _set(worker, RESUME, "api")
    return reply({"paused": False, "changed": changed})
