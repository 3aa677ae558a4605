"""The Schedules page and its JSON API: every recurring schedule, with pause, resume and "run now".

Schedules come from the app, else from the registry servers keep in Redis
(``lowkiq.console.schedules``). Each action is audited; forms are POST with a CSRF
token, then a redirect with a flash, as every action of the console.
"""

from __future__ import annotations

from flask import Response, request, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import schedule_runs
from ..console.cron_words import in_words
from ..console.schedules import ScheduleConsole, from_app
from . import actor
from .blueprint import bp
from .http import flash_back, no_parameters, page, reply
from .state import console


def _board() -> ScheduleConsole:
    return from_app(console().client)


def _act(name: str, verb: str, source: str) -> tuple[str, bool | float]:
    # An unknown name raises UnknownSchedule, an UnknownWorker: a 404 naming it (see blueprint).
    board = _board()
    if verb == "run":
        return f"Enqueued a run of {name} now.", board.run_now(name, who=actor.actor(), source=source)
    if verb == "pause":
        changed = board.pause(name, who=actor.actor(), source=source)
        return (f"Paused {name}: no tick of it is enqueued until it is resumed." if changed
                else f"{name} was paused already."), changed
    changed = board.resume(name, who=actor.actor(), source=source)
    return (f"Resumed {name}." if changed else f"{name} was not paused."), changed


@bp.get("/schedules")
def schedules_page() -> Response:
    board = _board()
    rows = board.rows()
    c = console()
    # Each schedule's last runs, from its id's history: a bounded walk each, for the first RUNS_SCHEDULES.
    runs = [schedule_runs.last_runs(c.client, row.info, load_error=c.load_error)
            for row in rows[:schedule_runs.RUNS_SCHEDULES]]
    ran = next((row.info for row in rows if row.info.name == request.args.get("ran")), None)
    return page("lowkiq/schedules.html", rows=rows, runs=runs, now=board.now(), ran=ran,
                source="app" if board.configured else "registry", in_words=in_words,
                runs_examined=schedule_runs.RUNS_EXAMINED, runs_schedules=schedule_runs.RUNS_SCHEDULES)


def _page_action(name: str, verb: str) -> BaseResponse:
    message, _ = _act(name, verb, "console")
    # After "Run now" the page names the run, with a link to its job and history.
    back = url_for(".schedules_page", ran=name) if verb == "run" else url_for(".schedules_page")
    return flash_back(back, message)


@bp.post("/schedules/<name>/pause")
def schedule_pause(name: str) -> BaseResponse:
    return _page_action(name, "pause")


@bp.post("/schedules/<name>/resume")
def schedule_resume(name: str) -> BaseResponse:
    return _page_action(name, "resume")


@bp.post("/schedules/<name>/run")
def schedule_run(name: str) -> BaseResponse:
    return _page_action(name, "run")


@bp.get("/api/v1/schedules")
def api_schedules() -> Response:
    return reply({"schedules": [row.as_json() for row in _board().rows()]})


@bp.post("/api/v1/schedules/<name>/pause")
def api_schedule_pause(name: str) -> Response:
    no_parameters("pause")
    _, changed = _act(name, "pause", "api")
    return reply({"schedule": name, "paused": True, "changed": changed})


@bp.post("/api/v1/schedules/<name>/resume")
def api_schedule_resume(name: str) -> Response:
    no_parameters("resume")
    _, changed = _act(name, "resume", "api")
    return reply({"schedule": name, "paused": False, "changed": changed})


@bp.post("/api/v1/schedules/<name>/run")
def api_schedule_run(name: str) -> Response:
    no_parameters("run")
    _, at = _act(name, "run", "api")
    return reply({"schedule": name, "enqueued": True, "scheduled_at": at})
