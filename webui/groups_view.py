"""A worker's groups in the console and the API: the tenant view, and pausing or resuming one group.

A paused group's ids stay queued, in order, while the worker's other groups flow (``lowkiq.console.groups``).
Every action is audited with the verified identity; forms are POST with a CSRF token, then a redirect with a
flash, as every action of the console.
"""

from __future__ import annotations

from flask import Response
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import WorkerView
from ..console import groups as console_groups
from ..console.groups import PAUSE, RESUME
from ..console.listing import BadInput
from . import actor, formatting
from .blueprint import bp
from .http import back as back_to
from .http import flash_back, no_parameters, reply
from .state import console

FLASH_GROUP_CHARS = 80


def _set(view: WorkerView, group: str, verb: str, source: str) -> bool:
    try:
        group = console_groups.checked_group(group)
    except (TypeError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    change = console_groups.pause if verb == PAUSE else console_groups.resume
    return change(console(), view, group, who=actor.actor(), source=source)


def _page_action(worker: str, group: str, verb: str) -> BaseResponse:
    view = console().worker(worker)
    back = back_to(view)  # checked before acting: a bad one must not leave the action done and a 400
    changed = _set(view, group, verb, "console")
    shown = formatting.clip(group, FLASH_GROUP_CHARS)
    if verb == PAUSE:
        message = (f"Paused group {shown} of {view.name}: its queued jobs wait, in order, while other groups run."
                   if changed else f"Group {shown} was paused already.")
    else:
        message = f"Resumed group {shown}: its jobs run again, in order." if changed else f"Group {shown} was not paused."
    return flash_back(back, message)


@bp.post("/workers/<worker>/groups/<path:group>/pause")
def group_pause(worker: str, group: str) -> BaseResponse:
    return _page_action(worker, group, PAUSE)


@bp.post("/workers/<worker>/groups/<path:group>/resume")
def group_resume(worker: str, group: str) -> BaseResponse:
    return _page_action(worker, group, RESUME)


@bp.post("/api/v1/workers/<worker>/groups/<path:group>/pause")
def api_group_pause(worker: str, group: str) -> Response:
    no_parameters("pause")
    changed = _set(console().worker(worker), group, PAUSE, "api")
    return reply({"group": group, "paused": True, "changed": changed})


@bp.post("/api/v1/workers/<worker>/groups/<path:group>/resume")
def api_group_resume(worker: str, group: str) -> Response:
    no_parameters("resume")
    changed = _set(console().worker(worker), group, RESUME, "api")
    return reply({"group": group, "paused": False, "changed": changed})


@bp.get("/api/v1/workers/<worker>/groups")
def api_groups(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    return reply({"worker": view.name, "groups": [row.as_json() for row in console_groups.groups(c, view)]})
