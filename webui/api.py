"""The JSON API, under ``api/v1`` of the console's prefix. Responses are never cached."""

from __future__ import annotations

import functools
from typing import Any

from flask import Response, request, url_for

from ..console import AREA_ORDERS, MATCHING_VERBS, WorkerView, finding, histories, listing, minute_totals
from ..console.listing import API_PAGE_SIZE, BadInput
from ..console.operations import MAX_IDS, OPERATIONS, RETRY_NOW, Operation
from ..console.terms import (
    CONSOLE_SHARD_BUDGET,
    MAX_LIMIT,
    ROW_BYTES,
    ROW_ERROR_BYTES,
    TTL_SECONDS,
    ConfirmationRefused,
    Minute,
    QueueMetrics,
)
from ..console.waiting import WaitingVersion
from ..jobs import Job, MorgueJob
from . import actor
from .blueprint import bp
from .dashboard import dashboard_data
from .formatting import filter_text
from .http import body_object, int_arg, no_parameters, reply
from .state import console, settings


def job_json(job: Job, *, traceback: bool = False) -> dict[str, Any]:
    """A job as the API shows it; ``traceback`` (up to traceback_limit characters) in lookups of one job."""
    data = {
        "id": job.id,
        "payloads": [[payload, score] for payload, score in job.payloads],
        "perform_in": job.perform_in,
        "retry_count": job.retry_count,
        "error": job.error,
    }
    if traceback:
        data["traceback"] = job.traceback
    if job.clipped:  # what the read cut (in Redis) to stay under its byte cap; absent when whole
        data["clipped"] = job.clipped.as_json()
    return data


def morgue_job_json(job: MorgueJob, *, traceback: bool = False) -> dict[str, Any]:
    data = {
        "id": job.id,
        "payloads": [[payload, score] for payload, score in job.payloads],
        "updated_at": job.updated_at,
        "error": job.error,
    }
    if traceback:
        data["traceback"] = job.traceback
    if job.clipped:
        data["clipped"] = job.clipped.as_json()
    return data


@bp.get("/api/v1/stats")
def api_stats() -> Response:
    """Exactly SPEC's shape: length = fresh + retries; total lag = the largest."""
    c = console()
    everything = c.metrics(full=False, groups=True)
    rows = [(view, m) for view, m in everything if m.measured]
    # Workers past the read's shard budget: named, never shown as zeros (absent when there are none).
    unmeasured = [view.name for view, m in everything if not m.measured]
    # held: the ids a whole_id morgue holds (every dead id of such a worker), from the dead count and the
    # registry's morgue_policy: no read more. Only for whole_id workers, and in total when there is one:
    # without them the answer keeps SPEC's exact shape.
    holding = [view for view, _ in rows if view.info.holds_dead_ids]
    # groups: queued ids per group, the 20 biggest and "(other)" (store/group_metrics.py), only for workers
    # with grouped ids queued: a worker without groups keeps SPEC's shape.
    by_worker = {
        view.name: {"length": m.length, "morgue_length": m.morgue_length, "lag": m.lag,
                    **({"held": m.morgue_length} if view.info.holds_dead_ids else {}),
                    **({"groups": groups_json(m)} if m.groups else {})}
        for view, m in rows
    }
    total = {
        "length": sum(m.length for _, m in rows),
        "morgue_length": sum(m.morgue_length for _, m in rows),
        "lag": max((m.lag for _, m in rows), default=0.0),
        **({"held": sum(held(view, m) for view, m in rows)} if holding else {}),
    }
    # Registry entries the console cannot use, by name, with their problem (absent when there are none).
    broken = {entry.name: entry.problem for entry in c.broken()}
    return reply({"total": total, "by_worker": by_worker, **({"broken": broken} if broken else {}),
                  **({"not_measured": not_measured_json(unmeasured)} if unmeasured else {})})


def groups_json(m: QueueMetrics) -> dict[str, dict[str, Any]]:
    return {g.name: {"length": g.length, "lag": g.lag} for g in m.groups}


def held(view: WorkerView, m: QueueMetrics) -> int:
    """Ids held in the morgue: for a whole_id worker every dead id (its later payloads join it), else none."""
    return m.morgue_length if view.info.holds_dead_ids else 0


def not_measured_json(names: list[str]) -> dict[str, Any]:
    return {"workers": names, "note": f"{len(names):,} workers are not measured: one read visits at most "
                                      f"{CONSOLE_SHARD_BUDGET:,} shards and these did not fit, so total leaves "
                                      f"them out; each worker's own page measures it."}


@bp.get("/api/v1/dashboard")
def api_dashboard() -> Response:
    data = dashboard_data(console())
    queues = [
        {
            "name": view.name,
            "queue_name": view.info.queue_name,
            "shards_count": view.info.shards_count,
            "lag": m.lag,
            "processed": m.processed,
            "dropped": m.dropped,  # payloads a per-id cap dropped (0 without one)
            "failed": m.failed,
            "busy": m.busy,
            "enqueued": m.length,
            "fresh": m.fresh,
            "retries": m.retries,
            "dead": m.morgue_length,
            "held": held(view, m),
            # who paused the queue and when (servers take none of its jobs), or null
            "paused": m.paused.as_json() if m.paused else None,
            # false when the read's shard budget left the worker out: its numbers are zeros, not readings
            "measured": m.measured,
        }
        for view, m in data["rows"]
    ]
    broken = [{"name": entry.name, "problem": entry.problem} for entry in data["broken"]]
    return reply({"queues": queues, "broken": broken, "totals": data["totals"], "redis_info": data["redis"],
                  "attention": data["attention"].as_json()})


def _listing_reply(shown: listing.Shown, encode: Any) -> Response:
    data: dict[str, Any] = {
        "jobs": [encode(job) for job in shown.rows],
        # Pass as ?after= / ?before= (with the same order_by, desc, min, max) for the next pages.
        "next": shown.next.after.encode() if shown.next and shown.next.after else None,
        "previous": shown.previous.before.encode() if shown.previous and shown.previous.before else None,
    }
    if shown.examined is not None:
        # A content search: each page examines a bounded number of ids, so it may hold fewer jobs than asked
        # while more follow; pass "continue" back as ?scan= (with the same filters) until it is null.
        data["scan"] = {"examined": shown.examined, "total": shown.total,
                        "continue": shown.next.scan if shown.next else None}
    return reply(data)


def _api_listing(worker: str, area: str) -> Response:
    c = console()
    view = c.worker(worker)
    orders, default, desc = AREA_ORDERS[area]
    args = listing.parse(request.args, orders, default_order=default, default_desc=desc, default_limit=API_PAGE_SIZE,
                         blank_is_absent=False)
    encode = morgue_job_json if area == "morgue" else job_json
    if args.tag:
        shown = listing.tagged(functools.partial(c.tagged_rows, view, area), args)
        return reply({"jobs": [encode(job) for job in shown.rows], "next": None, "previous": None,
                      # pass "continue" back as ?tag_after= (with the same tag) until it is null
                      "tagged": {"tag": args.tag, "continue": shown.next.tag_after if shown.next else None}})
    if args.content:
        return _listing_reply(listing.search(functools.partial(c.search, view, area), args), encode)
    q = c.queries(view)
    return _listing_reply(listing.fetch(q.morgue if area == "morgue" else q.enqueued, args), encode)


@bp.get("/api/v1/workers/<worker>/enqueued")
def api_enqueued(worker: str) -> Response:
    return _api_listing(worker, "enqueued")


@bp.get("/api/v1/workers/<worker>/morgue")
def api_morgue(worker: str) -> Response:
    return _api_listing(worker, "morgue")


@bp.get("/api/v1/workers/<worker>/busy")
def api_busy(worker: str) -> Response:
    from ..console.busy import busy_jobs

    c = console()
    view = c.worker(worker)
    _, jobs = busy_jobs(c, view, c.queries(view).busy())
    # How long each has run (Redis time since its batch was taken; null when its lease does not say)
    # and whether that is past the worker's time_limit (a perform that ignores TimeLimitExceeded).
    # Who performs it: the server's one name (its --name, else host:pid) and the thread, as its lease says.
    return reply({"jobs": [{**job_json(busy.job), "running_for": busy.running_for,
                            "over_time_limit": busy.over_time_limit, "in_run": busy.in_run,
                            "server": busy.lease.server.name if busy.lease and busy.lease.server else None,
                            "thread": busy.lease.thread if busy.lease else None} for busy in jobs],
                  "time_limit": view.info.time_limit, "concurrency": view.info.concurrency})


@bp.get("/api/v1/workers/<worker>/job")
def api_job_by_query(worker: str) -> Response:
    """As ``jobs/<id>``, for ids that a URL path would rewrite (``a/../b``)."""
    job_id = request.args.get("id", "")
    if not job_id:
        return reply({"error": "the job lookup needs ?id=<job id>"}, 400)
    return api_job(worker, job_id)


@bp.get("/api/v1/workers/<worker>/jobs/<path:job_id>")
def api_job(worker: str, job_id: str) -> Response:
    """Where the id is: queued, in processing, in the morgue (a queued id may also be dead)."""
    c = console()
    view = c.worker(worker)
    q = c.queries(view)
    queued, busy, dead = q.job(job_id), q.busy_job(job_id), q.morgue_job(job_id)
    waiting = c.waiting(view, job_id)
    if not (queued or busy or dead or waiting):
        return reply({"error": f"no job {job_id!r} in {view.name}"}, 404)
    return reply(
        {
            "id": job_id,
            "queued": job_json(queued, traceback=True) if queued else None,
            "busy": job_json(busy, traceback=True) if busy else None,
            "morgue": morgue_job_json(dead, traceback=True) if dead else None,
            "waiting": [waiting_json(version) for version in waiting],
            "dependents": [d.as_json() for d in c.dependents(view, job_id)],
            "tags": list(c.tags_of(view, job_id)),
        }
    )


def waiting_json(version: WaitingVersion) -> dict[str, Any]:
    """A version waiting for other ids (``after``): its payload, score, when it came, and what it waits on."""
    return {"payload": version.payload, "score": version.score, "since": version.since,
            "perform_in": version.perform_in, "after": [on.as_json() for on in version.on]}


@bp.get("/api/v1/workers/<worker>/tagged/<path:tag>")
def api_tagged(worker: str, tag: str) -> Response:
    """The ids tagged ``tag`` (docs/tags.md), each once across the pages: ``limit`` (1..1000, default 100) per
    page, ``after=<next>`` for the following one; ``next`` null after the last. A page reads the tag's index,
    not the queue, and may hold fewer than ``limit`` ids while more follow."""
    c = console()
    page = c.tagged(c.worker(worker), tag, limit=int_arg("limit", API_PAGE_SIZE, 1, MAX_LIMIT),
                    after=request.args.get("after") or None)
    return reply({"tag": tag, "jobs": [job.as_json() for job in page.jobs], "next": page.next})


# Where Console.find says a job is, by the key jobs/<id> gives that place.
FOUND_KEYS = {"queued": "queued", "busy": "busy", "dead": "morgue"}


@bp.get("/api/v1/search")
def api_search() -> Response:
    """An id in every worker, as the header's search finds it: each worker that holds it, with where, as
    ``jobs/<id>`` answers it. Nothing found is an empty list, not a 404: the search itself went well. Up to
    finding.SEARCH_WORKERS workers a request: ``searched`` says which, ``from=<its continue>`` goes on."""
    job_id = listing.searched_id(request.args.get("id", ""))
    if not job_id:
        return reply({"error": "the search needs ?id=<job id>"}, 400)
    by_worker: dict[str, dict[str, Any]] = {}
    c = console()
    done = finding.search(c, job_id, start=finding.start_of(request.args.get("from", "")),
                          history_limit=SEARCH_HISTORY_EVENTS)
    for found in done.found:
        entry = by_worker.get(found.view.name)
        if entry is None:
            entry = by_worker[found.view.name] = {"worker": found.view.name, "queued": None, "busy": None,
                                                  "morgue": None, "tags": list(c.tags_of(found.view, job_id))}
        encode = morgue_job_json if found.where == "dead" else job_json
        entry[FOUND_KEYS[found.where]] = encode(found.job, traceback=True)
    # Each worker whose history holds the id, with its newest events: an id performed earlier is found too.
    remembered = [shown.as_json() for shown in done.remembered]
    return reply({"id": job_id, "found": list(by_worker.values()), "history": remembered,
                  "searched": done.progress()})


# Events per worker a search answers with (the history route gives more).
SEARCH_HISTORY_EVENTS = 20


@bp.get("/api/v1/workers/<worker>/job/history")
def api_job_history(worker: str) -> Response:
    """The id's history in this worker, newest first (docs/history.md): ``?id=`` and ``limit`` (1..1000, default
    200). An id its shard's history does not hold is an empty list: the history only reaches back so far."""
    job_id = request.args.get("id", "")
    if not job_id:
        return reply({"error": "the history needs ?id=<job id>"}, 400)
    limit = int_arg("limit", histories.LIMIT, 1, MAX_HISTORY_EVENTS)
    c = console()
    return reply(histories.of(c, c.worker(worker), job_id, limit=limit).as_json())


MAX_HISTORY_EVENTS = 1000


@bp.get("/api/v1/history")
def api_history() -> Response:
    """Per-minute processed, failed and lag of every worker and in total, over ``?hours=`` (1, 6, 24 or 48)."""
    from . import minute_chart

    c = console()
    hours = minute_chart.window()
    views = c.workers()
    now = c.clock()
    per_queue = minute_chart.read(c, [v.info.queue_name for v in views], hours, now)
    start = now - hours * 3600

    def rows(minutes: list[Minute]) -> list[dict[str, float]]:
        return [{"minute": m.minute, "processed": m.processed, "failed": m.failed, "lag": m.lag, "minutes": m.span}
                for m in minutes if m.minute >= start]

    by_worker = {v.name: rows(per_queue[v.info.queue_name]) for v in views}
    total = rows(minute_totals.combine(per_queue.values()))
    return reply({"hours": hours, "total": total, "by_worker": by_worker})


@bp.get("/api/v1/openapi.json")
def api_openapi() -> Response:
    """The OpenAPI 3.1 document of this API; its server is the prefix this request came through."""
    from . import openapi  # it imports this module's constants: at the top the import would be circular

    prefix = url_for(".dashboard").rstrip("/") or "/"
    return reply(openapi.document(prefix, basic_auth=settings().password is not None))


def _body_with(field: str, example: str) -> dict[str, Any]:
    """The request's JSON object, which may hold ``field`` and nothing else; else BadInput showing ``example``."""
    body = body_object()
    if body is None:
        raise BadInput(f"the body must be a JSON object like {example}")
    unknown = set(body) - {field}
    if unknown:
        raise BadInput(f'unknown fields {sorted(unknown)}; expected only "{field}"')
    return body


def _body_ids(op: Operation) -> list[str]:
    if not op.takes_ids:
        no_parameters(op.path)
        return []
    body = _body_with("ids", '{"ids": ["1", "2"]}')
    ids = body.get("ids")
    if not isinstance(ids, list):
        raise BadInput('"ids" must be a list of job ids (strings or integers)')
    if len(ids) > MAX_IDS:
        raise BadInput(f'"ids" holds {len(ids)} ids; at most {MAX_IDS} per request')
    return [_job_id(job_id, f'"ids"[{i}]') for i, job_id in enumerate(ids)]


def _job_id(value: Any, field: str) -> str:
    """A job id of a JSON body: a non-empty string, or an integer (its decimal text)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise BadInput(f"{field} must be a non-empty string or an integer, got {value!r:.100}")
    try:
        text = str(value)
        text.encode()
    except ValueError as exc:  # an int past Python's digit limit, or a lone surrogate ("\ud800")
        raise BadInput(f"{field} cannot be a job id: {exc}") from None
    return text


def _api_act(op: Operation, worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    return reply({"count": actor.run_operation(c, op, view, _body_ids(op), "api")})


@bp.post("/api/v1/workers/<worker>/enqueued/retry_now")
def api_retry_now(worker: str) -> Response:
    """A queued job's own "Retry now" (the job page's): ``{"id": ...}`` due now if it was scheduled later.
    Audited as the page's is; an id not in the queue is a 404 that touches nothing and records nothing."""
    c = console()
    view = c.worker(worker)
    body = _body_with("id", '{"id": "1042"}')
    if "id" not in body:
        raise BadInput('retry now needs "id": the id of one queued job')
    job_id = _job_id(body["id"], '"id"')
    # Read with a listing row's caps: only whether it is queued matters here.
    if not c.queries(view).jobs([job_id], cap=ROW_BYTES, error_cap=ROW_ERROR_BYTES):
        return reply({"error": f"no queued job {job_id!r} in {view.name}"}, 404)
    # 0 when it was already due, or left the queue since the read above (performed, killed, deleted).
    return reply({"count": actor.run_operation(c, RETRY_NOW, view, [job_id], "api")})


@bp.post("/api/v1/workers/<worker>/busy/stop")
def api_busy_stop(worker: str) -> Response:
    """Stop a process-isolated perform: ``{"id": ...}``, one id of the batch. 202 once asked (its server kills
    the child within about a second; the batch fails with PerformStopped), audited; 409 for a thread-isolated
    worker (or a batch no live server holds), 404 for an id that is not busy: then nothing is recorded."""
    from ..console import busy

    c = console()
    view = c.worker(worker)
    body = _body_with("id", '{"id": "1042"}')
    if "id" not in body:
        raise BadInput('stopping a perform needs "id": the id of a busy job')
    job_id = _job_id(body["id"], '"id"')
    try:
        busy.stop(c, view, job_id, who=actor.actor(), source="api")
    except busy.StopRefused as exc:
        return reply({"error": str(exc)}, exc.status)
    return reply({"id": job_id, "stop": "requested",
                  "note": "the server performing it kills its child process within about a second; the batch "
                          "fails with PerformStopped, and the retry rules apply"}, 202)


# What a refused confirmation answers: a token never issued is not found; a reused one, an expired one or one
# that counted another action conflicts with the request (its "reason" says which).
REFUSAL_STATUS = {"used": 409, "expired": 409, "unknown": 404, "mismatch": 409}
MATCHING_FIELDS = ("action", "order_by", "min", "max", "error_class", "error", "payload", "match_case", "tag",
                   "dry_run", "confirm")


@bp.post("/api/v1/workers/<worker>/enqueued/matching")
def api_enqueued_matching(worker: str) -> Response:
    return _api_matching(worker, "enqueued")


@bp.post("/api/v1/workers/<worker>/morgue/matching")
def api_morgue_matching(worker: str) -> Response:
    return _api_matching(worker, "morgue")


def _api_matching(worker: str, area: str) -> Response:
    """A filter-scoped action in two steps: ``dry_run`` counts the jobs the filter matches now and answers a
    token; the same body with ``confirm: <token>`` acts on exactly the jobs counted (those that still match)."""
    c = console()
    view = c.worker(worker)
    body = body_object()
    if body is None:
        raise BadInput('the body must be a JSON object like {"action": "requeue", "dry_run": true}')
    unknown = sorted(set(body) - set(MATCHING_FIELDS))
    if unknown:
        raise BadInput(f"unknown fields {unknown}; expected {', '.join(MATCHING_FIELDS)}")
    verbs = MATCHING_VERBS["morgue" if area == "morgue" else "enqueued"]
    verb = body.get("action")
    if not isinstance(verb, str) or verb not in verbs:  # {} or [] would be unhashable to "in"
        raise BadInput(f'"action" must be one of {", ".join(verbs)} on {area} jobs, got {verb!r:.100}')
    dry_run, token = body.get("dry_run", False), body.get("confirm")
    if not isinstance(dry_run, bool):
        raise BadInput(f'"dry_run" must be true or false, got {dry_run!r:.100}')
    if dry_run == (token is not None):
        raise BadInput('send either "dry_run": true (to count) or "confirm": "<token>" (to act), not both or neither')
    if token is not None and not isinstance(token, str):
        raise BadInput(f'"confirm" must be the token a dry run answered, got {token!r:.100}')
    if not isinstance(body.get("match_case", False), bool):
        raise BadInput(f'"match_case" must be true or false, got {body["match_case"]!r:.100}')
    orders, default, _ = AREA_ORDERS[area]
    fields: dict[str, Any] = {name: _form_value(name, body.get(name)) for name in ("order_by", "min", "max")}
    fields.update({name: body[name] for name in (*listing.CONTENT_FIELDS, "match_case") if name in body})
    if "tag" in body:
        if not isinstance(body["tag"], str) or not body["tag"]:
            raise BadInput(f'"tag" must be a non-empty string, got {body["tag"]!r:.100}')
        fields["tag"] = body["tag"]
    args = listing.parse(fields, orders, default_order=default, default_limit=1, blank_is_absent=False)
    bounds: dict[str, Any] = {"min": args.min or None, "max": args.max or None, "content": args.content,
                              "tag": args.tag}
    if token is None:
        pending = c.count_matching(view, area, verb, args.order_by, **bounds)
        return reply({"count": pending.count, "confirm": pending.token, "sample": pending.sample,
                      "expires_in": TTL_SECONDS})
    try:
        done = c.act_on_counted(view, area, verb, args.order_by, token, who=actor.actor(), source="api",
                                action=f"{area}/{verb}_matching", scope=filter_text(args), **bounds)
    except ConfirmationRefused as exc:
        return reply({"error": str(exc), "reason": exc.reason}, REFUSAL_STATUS[exc.reason])
    return reply({"touched": done.touched, "counted": done.counted, "skipped": done.skipped})


def _form_value(name: str, value: Any) -> str:
    """A JSON field as the listing's form reads it: a string or a number; null or absent is open (the default)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadInput(f'"{name}" must be a string or a number, got {value!r:.100}')
    return value if isinstance(value, str) else repr(value)


def _register() -> None:
    for op in OPERATIONS:
        bp.add_url_rule(
            f"/api/v1/workers/<worker>/{op.path}",
            endpoint=f"api_{op.endpoint}",
            view_func=lambda worker, op=op: _api_act(op, worker),
            methods=["POST"],
        )


_register()
