"""HTML pages. Every GET only reads; every form POST acts, then redirects (303) with a flash."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from flask import Response, abort, redirect, render_template, request, url_for
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import AREA_ORDERS, Console, WorkerView, finding, histories, listing, minute_totals
from ..console import groups as console_groups
from ..console.busy import THREAD_PERFORMS, stoppable
from ..console.listing import BadInput
from ..console.operations import BY_ENDPOINT, MATCHING_BY_VERB, MAX_IDS, OPERATIONS, RETRY_NOW, Operation
from ..console.terms import ConfirmationRefused
from . import actor, formatting, minute_chart
from .blueprint import bp
from .dashboard import dashboard_data
from .formatting import filter_text
from .http import PAGE_SIZES, flash_back, page
from .http import back as back_to
from .state import console

# A flash travels in a cookie, which browsers drop whole past 4 KB: a filter value is cut to this many
# characters there (the audit log keeps it whole). Even two values of 4-byte characters, each quoted as
# 16 in the cookie, leave the cookie under 3.5 KB.
FLASH_FILTER_CHARS = 100


# ---- dashboard ------------------------------------------------------------


@bp.get("/")
def dashboard() -> Response:
    return page("lowkiq/dashboard.html", windows=minute_chart.WINDOWS, hours=minute_chart.window(),
                **dashboard_data(console()))


@bp.get("/_history")
def dashboard_history() -> str:
    """The dashboard's history panel, loaded after the page: reading every worker's minutes costs more than
    the rest of the dashboard."""
    c = console()
    hours = minute_chart.window()
    now = c.clock()
    per_queue = minute_chart.read(c, [view.info.queue_name for view in c.workers()], hours, now)
    past = minute_chart.build(minute_totals.combine(per_queue.values()), hours, now)
    return render_template("lowkiq/_history_panel.html", history=past, windows=minute_chart.WINDOWS, hours=hours)


@bp.get("/_live")
def dashboard_live() -> str:
    """The polled part of the dashboard (numbers, chart, Redis info), swapped in place."""
    return render_template("lowkiq/_live.html", **dashboard_data(console()))


# ---- one worker -----------------------------------------------------------------


@bp.get("/workers/<worker>")
def worker(worker: str) -> Response:
    console().worker(worker)
    return redirect(url_for(".enqueued", worker=worker))  # type: ignore[return-value]


@bp.get("/workers/<worker>/enqueued")
def enqueued(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    args = _listing_args("enqueued")
    shown = _shown(c, view, "enqueued", args)
    return page("lowkiq/enqueued.html", view=view, shown=shown, tab="enqueued", orders=AREA_ORDERS["enqueued"].orders,
                now=c.clock(), matching=shown.matching or 0, filtered=args.bounded)


@bp.get("/workers/<worker>/morgue")
def morgue(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    args = _listing_args("morgue")
    shown = _shown(c, view, "morgue", args)
    return page("lowkiq/morgue.html", view=view, shown=shown, tab="morgue", orders=AREA_ORDERS["morgue"].orders,
                now=c.clock(), matching=shown.matching or 0, filtered=args.bounded)


def _shown(c: Console, view: WorkerView, area: str, args: listing.Listing) -> listing.Shown:
    """A page of ``area``: a content search's page (bounded, with its progress), else a page of the index with
    what the bulk buttons would touch counted in the same round trip, before the operator confirms."""
    if args.tag:
        return listing.tagged(functools.partial(c.tagged_rows, view, area), args)
    if args.content:
        return listing.search(functools.partial(c.search, view, area), args)
    query = c.queries(view).morgue if area == "morgue" else c.queries(view).enqueued
    return listing.fetch(functools.partial(query, with_count=True), args)


def _listing_args(area: str) -> listing.Listing:
    """The listing a page of ``area`` asks for, in the area's default order when it names none."""
    orders, default, desc = AREA_ORDERS[area]
    return listing.parse(request.args, orders, default_order=default, default_desc=desc, default_limit=PAGE_SIZES[0])


@bp.post("/workers/<worker>/morgue/<verb>_matching")
def morgue_matching(worker: str, verb: str) -> BaseResponse:
    """Requeue or delete every dead job the filter shown matches (all of them without one), in chunks."""
    return _matching(worker, "morgue", verb)


@bp.post("/workers/<worker>/enqueued/<verb>_matching")
def enqueued_matching(worker: str, verb: str) -> BaseResponse:
    """Delete, kill or perform now every queued job the filter shown matches (all without one), in chunks."""
    return _matching(worker, "enqueued", verb)


def _matching(worker: str, area: str, verb: str) -> BaseResponse:
    """Without ``confirm``: count what the filter matches now and ask, on a page of its own, to act on
    exactly those (the dry run). With the token that page carries: act on the jobs counted."""
    operation = MATCHING_BY_VERB.get((area, verb))
    if operation is None:
        abort(404)
    c = console()
    view = c.worker(worker)
    back = back_to(view)
    orders, default, _ = AREA_ORDERS[area]
    args = listing.parse(request.form, orders, default_order=default, default_limit=PAGE_SIZES[0])
    bounds: dict[str, Any] = {"min": args.min or None, "max": args.max or None, "content": args.content,
                              "tag": args.tag}
    kind = "dead job" if area == "morgue" else "queued job"
    token = request.form.get("confirm", "")
    if not token:
        pending = c.count_matching(view, area, verb, args.order_by, **bounds)
        if not pending.count:
            return flash_back(back, f"No {kind} matches now ({filter_text(args, FLASH_FILTER_CHARS)}): nothing done.")
        ask = operation.ask.format(jobs=formatting.plural(pending.count, kind))
        return page("lowkiq/confirm.html", view=view, tab="", ask=ask, pending=pending, back=back,
                    scope=filter_text(args), fields=args.first_page().args(),
                    action=url_for(f".{area}_matching", worker=view.name, verb=verb))
    try:
        done = c.act_on_counted(view, area, verb, args.order_by, token, who=actor.actor(), source="console",
                                action=f"{area}/{verb}_matching", scope=filter_text(args), **bounds)
    except ConfirmationRefused as exc:
        return flash_back(back, f"Nothing done: {exc}.")
    jobs = formatting.plural(done.touched, kind)
    message = f"{operation.done.format(jobs=jobs)} ({filter_text(args, FLASH_FILTER_CHARS)})."
    if done.skipped:
        message += (f" {done.skipped:,} of the {done.counted:,} counted no longer matched "
                    f"(performed, moved or changed since the count) and were left alone.")
    return flash_back(back, message)




@bp.get("/workers/<worker>/busy")
def busy(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    from ..console.busy import busy_jobs
    from ..console.servers import long_perform_seconds

    leases, jobs = busy_jobs(c, view, c.queries(view).busy())
    return page("lowkiq/busy.html", view=view, jobs=jobs, tab="busy", now=c.clock(), leases=leases,
                long_perform=long_perform_seconds(), time_limit=view.info.time_limit,
                over_limit=sum(b.over_time_limit for b in jobs), stoppable=stoppable(view),
                thread_performs=THREAD_PERFORMS)


# What the busy page says when a stop cannot be asked (StopRefused.reason); the API answers the whole message.
STOP_REFUSALS = {
    "thread": f"Nothing done: {THREAD_PERFORMS}.",
    "not_busy": "Job {job} is not busy any more: nothing to stop.",
    "no_server": "Nothing done: no live server holds the shard of job {job}; its batch goes back to the queue when "
                 "another server takes the shard over.",
}


def _form_job_id(missing: str) -> str:
    """The one job id a form posts (encoded as the pages encode ids); ``missing`` says what needs it."""
    try:
        job_id = formatting.form_id_decode(request.form.get("id", ""))
    except ValueError as exc:
        raise BadInput(f"id: {exc}") from None
    if not job_id:
        raise BadInput(missing)
    return job_id


@bp.post("/workers/<worker>/busy/stop")
def busy_stop(worker: str) -> BaseResponse:
    """The busy list's Stop button (process isolation): its server kills the perform's child, the batch fails
    with PerformStopped. Audited; refused for a thread-isolated worker and for an id that is not busy."""
    from ..console.busy import StopRefused, stop

    c = console()
    view = c.worker(worker)
    back = back_to(view)
    job_id = _form_job_id("stopping a perform needs the id of one busy job")
    shown = formatting.clip(job_id, FLASH_FILTER_CHARS)
    try:
        stop(c, view, job_id, who=actor.actor(), source="console")
    except StopRefused as exc:
        return flash_back(back, STOP_REFUSALS[exc.reason].format(job=shown))
    return flash_back(back, f"Stopping job {shown}: its server kills the perform's child process within about a "
                            "second, and the batch fails with PerformStopped (the retry rules apply).")


@bp.get("/workers/<worker>/_counts")
def worker_counts(worker: str) -> str:
    """The tab counts, loaded after the page so that a listing stays two round trips."""
    c = console()
    view = c.worker(worker)
    [(_, metrics)] = c.metrics([view], groups=True)  # a second round trip only when a shard holds groups
    now = c.clock()
    hours = minute_chart.WINDOWS[0]
    minutes = minute_chart.read(c, [view.info.queue_name], hours, now)[view.info.queue_name]
    return render_template("lowkiq/_counts.html", view=view, m=metrics, tab=request.args.get("tab", ""),
                           waiting=c.waiting_count(view), paused_groups=console_groups.paused(c, view),
                           now=now, next_url=_current_page(view), history=minute_chart.build(minutes, hours, now))


def _current_page(view: WorkerView) -> str:
    """The page that loaded the counts (htmx says which), for its forms to return to; else the worker's page."""
    current = urlsplit(request.headers.get("HX-Current-URL", ""))
    if current.path.startswith(url_for(".dashboard")):
        return current.path + (f"?{current.query}" if current.query else "")
    return url_for(".enqueued", worker=view.name)


@bp.get("/workers/<worker>/job")
def job_by_query(worker: str) -> Response:
    """The job page the console links to: an id in the query string survives any character.

    In the path, browsers rewrite ids such as ``a/../b`` before sending them.
    """
    job_id = request.args.get("id", "")
    if not job_id:
        abort(400, "the job page needs ?id=<job id>")
    return job(worker, job_id)


@bp.get("/search")
def search() -> BaseResponse:
    """An id in every worker, from the header's search box: queued, busy or dead, with a link to each; up to
    finding.SEARCH_WORKERS workers a request, and a link that searches the next ones."""
    job_id = listing.searched_id(request.args.get("id", ""))
    c = console()
    if not job_id:
        return page("lowkiq/search.html", job_id="", found=[], remembered=[], searched=None, now=c.clock())
    # Not queued, busy or dead: its history may still hold it (performed earlier, deleted)
    done = finding.search(c, job_id, start=finding.start_of(request.args.get("from", "")), history_limit=1,
                          history_when_found=False)
    workers = {f.view.name for f in done.found} | {shown.view.name for shown in done.remembered}
    if done.whole and len(workers) == 1:  # straight to the job page: every state of the id and its history
        return redirect(url_for(".job_by_query", worker=workers.pop(), id=job_id), code=303)
    return page("lowkiq/search.html", job_id=job_id, found=done.found, remembered=done.remembered, searched=done,
                now=c.clock(), status=200 if workers or done.following is not None else 404)


@bp.get("/workers/<worker>/jobs/<path:job_id>")
def job(worker: str, job_id: str) -> Response:
    c = console()
    view = c.worker(worker)
    q = c.queries(view)
    in_processing = q.busy_job(job_id)
    found = {"queued": q.job(job_id), "busy": in_processing, "morgue": q.morgue_job(job_id)}
    shown = histories.of(c, view, job_id)
    waiting = c.waiting(view, job_id)
    status = 200 if any(found.values()) or waiting or shown.history.events else 404
    busy = None
    if in_processing is not None:  # which server performs it, since when: one more read, only then
        from ..console.busy import busy_jobs

        busy = busy_jobs(c, view, [in_processing])[1][0]
    return page("lowkiq/job.html", view=view, job_id=job_id, found=found, shown=shown, tab="", now=c.clock(),
                status=status, waiting=waiting, dependents=c.dependents(view, job_id), tags=c.tags_of(view, job_id),
                lease=busy.lease if busy else None, busy=busy, time_limit=view.info.time_limit)


# ---- actions -----------------------------------------------------------------------


def _act(op: Operation, worker: str) -> BaseResponse:
    c = console()
    view = c.worker(worker)
    back = back_to(view)  # checked before acting: a bad one must not leave an action done and a 400
    try:
        ids = [formatting.form_id_decode(value) for value in request.form.getlist("ids")[:MAX_IDS]]
    except ValueError as exc:
        raise BadInput(f"ids: {exc}") from None
    if op.takes_ids and not ids:
        return flash_back(back, "No job selected.")
    return flash_back(back, op.message(actor.run_operation(c, op, view, ids, "console")))


@bp.post("/workers/<worker>/enqueued/retry_now")
def retry_now(worker: str) -> BaseResponse:
    """A queued job's own "Retry now", from its page (RETRY_NOW, in console/operations.py)."""
    c = console()
    view = c.worker(worker)
    back = back_to(view)
    job_id = _form_job_id("retry now needs the id of one queued job")
    count = actor.run_operation(c, RETRY_NOW, view, [job_id], "console")
    if count:
        return flash_back(back, f"Job {formatting.clip(job_id, FLASH_FILTER_CHARS)} will run now.")
    return flash_back(back, f"Job {formatting.clip(job_id, FLASH_FILTER_CHARS)} was already due, or is no longer "
                            "queued: nothing changed.")


def _register_actions() -> None:
    for op in OPERATIONS:
        bp.add_url_rule(
            f"/workers/<worker>/{op.path}",
            endpoint=f"do_{op.endpoint}",
            view_func=lambda worker, op=op: _act(op, worker),
            methods=["POST"],
        )


_register_actions()


def action_url(name: str, worker: str) -> str:
    """The form target of an operation, for templates: action_url('morgue_requeue', ...)."""
    return url_for(f".do_{BY_ENDPOINT[name].endpoint}", worker=worker)


@bp.context_processor
def _actions_context() -> dict[str, Any]:
    return {"action_url": action_url}


# ---- rendering ---------------------------------------------------------------------
