"""``lowkiq stats|servers|jobs|morgue|pause|resume|schedules|audit|groups``: what the console shows and does, from a shell.

They read the same Redis as the console (``--redis-url``, ``--app``, else
LOWKIQ_APP, LOWKIQ_REDIS_URL, REDIS_URL, else the embedded Redis) through the same
console model, so answers and validation match the pages. Tables for people,
``--json`` for scripts. A destructive action asks for confirmation unless
``--yes``, ``--dry-run`` counts what it would touch, and every action done is
recorded in the audit log (source "cli", the user from $USER). What people read is
drawn in ``human.py`` (local times, or UTC with ``--utc``); a lookup that finds nothing
exits 1, a mistake 2.
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import redis

from ..console.audit_log import read as read_audit_log
from ..console.audit_log import record as record_action
from ..console.terms import MORGUE_ORDERS, ConfirmationRefused
from ..transport import TopologyError
from . import human
from . import id_history as id_history_text
from .commands import COMMANDS
from .human import Style

if TYPE_CHECKING:
    from ..console import Console

EXIT_USAGE = 2
EXIT_NOT_FOUND = 1
REDIS_TIMEOUT = 5.0
MAX_LIMIT = 1000  # as the console's pages and API
SAMPLE = 10  # ids a dry run shows of those it would touch


class OpsError(Exception):
    """One line for the operator, exit status 2."""


@dataclass(frozen=True)
class Shown:
    """A command's outcome: ``data`` is what --json prints (its shape is for scripts: keep it), ``text``
    draws it for people; ``status`` is the exit status, with ``complaint`` for stderr (nothing found)."""

    data: Any
    text: Callable[[Style], str]
    status: int = 0
    complaint: str = ""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which also says which command or choice a mistyped one may have meant."""

    def error(self, message: str) -> NoReturn:
        super().error(message + suggestion(message))


def suggestion(message: str) -> str:
    """`` (did you mean 'find'?)`` for argparse's "invalid choice" message, when a choice is close."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not found:
        return ""
    choices = [c.strip().strip("'") for c in found.group(2).split(",")]
    close = difflib.get_close_matches(found.group(1), choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--redis-url", metavar="URL", help="Redis to use (default: LOWKIQ_REDIS_URL, REDIS_URL, "
                        "else the embedded Redis of ./.lowkiq)")
    common.add_argument("--app", metavar="APP.py", help="the app file, for its Redis and serializers (LOWKIQ_APP)")
    common.add_argument("--json", action="store_true", help="JSON for scripts instead of text for people "
                        "(times as unix seconds)")
    common.add_argument("--utc", action="store_true", help="times in UTC (default: the local time zone)")
    p = _Parser(prog="lowkiq", description="Operate lowkiq's queues from a shell.")
    sub = p.add_subparsers(dest="command", required=True)
    day_stats = sub.add_parser("stats", parents=[common], help=COMMANDS["stats"])
    day_stats.add_argument("worker", nargs="?", help="one worker's wait and run times of a day instead")
    day_stats.add_argument("--day", metavar="YYYY-MM-DD", help="with WORKER: the UTC day (default: today)")
    group_words = sub.add_parser("groups", parents=[common], help=COMMANDS["groups"])
    group_words.add_argument("words", nargs="+", metavar="WORKER | pause|resume WORKER GROUP")
    sub.add_parser("servers", parents=[common], help=COMMANDS["servers"])
    jobs = sub.add_parser("jobs", parents=[common], help=COMMANDS["jobs"])
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True)
    find = jobs_sub.add_parser("find", parents=[common], help="an id in every worker: queued, busy, dead")
    find.add_argument("id")
    history = jobs_sub.add_parser("history", parents=[common],
                                  help="an id's history in every worker: enqueued, taken, failed, performed, by whom")
    history.add_argument("id")
    history.add_argument("--worker", default="", help="only this worker's history of the id")
    history.add_argument("--limit", type=int, default=50, help="events per worker at most, newest (default 50)")
    tagged = jobs_sub.add_parser("tagged", parents=[common],
                                 help="the ids that carry a tag, in every worker: queued, busy, dead")
    tagged.add_argument("tag")
    tagged.add_argument("--worker", default="", help="only this worker's ids")
    tagged.add_argument("--limit", type=int, default=50, help="ids per worker at most (default 50)")
    tagged.add_argument("--after", metavar="CURSOR", default="",
                        help="with --worker: go on where a previous page stopped (the cursor it printed)")
    stop = jobs_sub.add_parser("stop", parents=[common],
                               help="stop a busy job's perform (isolation = \"process\"): its child process is "
                                    "killed and the batch fails with PerformStopped (the retry rules apply)")
    stop.add_argument("worker")
    stop.add_argument("id")
    stop.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    hot = jobs_sub.add_parser("hot", parents=[common],
                              help="a worker's hot ids over the last hour: the most versions enqueued, retries and "
                                   "perform time, and each shard's lag with its oldest due id")
    hot.add_argument("worker")
    listing = jobs_sub.add_parser("list", parents=[common], help="a worker's queued, busy or dead jobs")
    listing.add_argument("worker")
    which = listing.add_mutually_exclusive_group(required=True)
    for kind in ("queued", "busy", "dead"):
        which.add_argument(f"--{kind}", dest="kind", action="store_const", const=kind)
    listing.add_argument("--limit", type=int, default=50, help="jobs at most (default 50)")
    _filter_arguments(listing, "queued: id, perform_in or retry_count; dead: id or updated_at")
    # The console's sort: dead jobs open newest first (updated_at, descending), anything else ascends.
    direction = listing.add_mutually_exclusive_group()
    direction.add_argument("--desc", dest="desc", action="store_const", const=True, default=None,
                           help="the highest first (the default for --dead by updated_at: newest first)")
    direction.add_argument("--asc", dest="desc", action="store_const", const=False,
                           help="the lowest first (the default for --queued, and for --dead --filter id)")
    _content_arguments(listing)
    listing.add_argument("--scan", metavar="TOKEN", default="",
                         help="go on with a content search where its previous page stopped (the token it printed)")
    morgue = sub.add_parser("morgue", parents=[common], help=COMMANDS["morgue"])
    morgue.add_argument("action", choices=["requeue", "delete"])
    morgue.add_argument("worker")
    # Not required by argparse: content filters alone scope an action too (checked in morgue_action).
    scope = morgue.add_mutually_exclusive_group()
    scope.add_argument("--ids", nargs="+", metavar="ID", help="these dead jobs")
    scope.add_argument("--filter", metavar="FIELD", choices=MORGUE_ORDERS,
                       help="the dead jobs whose FIELD (id or updated_at) is within --min..--max, as the console's "
                            "filter")
    scope.add_argument("--all", action="store_true", help="every dead job of the worker")
    _bounds_arguments(morgue)
    _content_arguments(morgue)
    morgue.add_argument("--dry-run", action="store_true", help="count what would be touched, touch nothing; with "
                        "--filter or --all, also print a token that --confirm takes within 10 minutes")
    morgue.add_argument("--confirm", metavar="TOKEN", help="act on exactly the jobs an earlier --dry-run counted "
                        "(same worker, action and filter), without asking")
    morgue.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    for verb in ("pause", "resume"):
        sub.add_parser(verb, parents=[common], help=COMMANDS[verb]).add_argument("worker")
    schedules = sub.add_parser("schedules", parents=[common], help=COMMANDS["schedules"])
    schedules.add_argument("action", nargs="?", choices=["pause", "resume", "run"],
                           help="pause: no tick is enqueued until resumed; run: enqueue its job now (also paused)")
    schedules.add_argument("name", nargs="?", help="the schedule's name")
    log = sub.add_parser("audit", parents=[common], help=COMMANDS["audit"])
    log.add_argument("--limit", type=int, default=50)
    return p


def _filter_arguments(p: argparse.ArgumentParser, fields: str) -> None:
    p.add_argument("--filter", metavar="FIELD", help=f"order and filter by FIELD ({fields}); with --min/--max")
    _bounds_arguments(p)


def _content_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--error-class", metavar="CLASS", help="only jobs whose error's class (its text before the first "
                   "':') is CLASS")
    p.add_argument("--error", metavar="TEXT", help="only jobs whose error text contains TEXT (plain text)")
    p.add_argument("--payload", metavar="TEXT", help="only jobs with a payload whose stored (serialized) text "
                   "contains TEXT; content filters search a bounded number of jobs per page (see --scan)")
    p.add_argument("--match-case", action="store_true", help="compare the content filters' letters as given; "
                   "by default case is ignored (--error timeout finds 'Timeout after 30 s')")


def _content(args: argparse.Namespace) -> Any:
    """The content filter of --error-class/--error/--payload, checked as the API checks it (an empty one refused)."""
    from ..console import listing

    given = {name: getattr(args, name) for name in listing.CONTENT_FIELDS if getattr(args, name) is not None}
    if args.match_case:
        given["match_case"] = "1"
    try:
        return listing.content_filter(given, blank_is_absent=False)
    except listing.BadInput as exc:
        raise OpsError(f"--{str(exc).replace('_', '-')}") from None


def _content_json(content: Any) -> dict[str, Any]:
    """A content filter as the JSON output says it: the fields given, and match_case (false: case ignored)."""
    given = {name: value for name, value in zip(("error_class", "error", "payload"), content.args()) if value}
    return {**given, "match_case": content.match_case}


def _bounds_arguments(p: argparse.ArgumentParser) -> None:
    for bound in ("min", "max"):
        p.add_argument(f"--{bound}", default="", metavar="VALUE",
                       help=f"the {'lowest' if bound == 'min' else 'highest'} FIELD kept, inclusive: an id, a number, "
                            "or for times a unix time or a local date like '2026-11-24 03:00'")


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        console = _console(args)
        shown = _run(console, args)
    except OpsError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (redis.RedisError, TopologyError, OSError, ValueError) as exc:
        print(f"lowkiq: Redis: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if shown.complaint:
        print(f"lowkiq: {shown.complaint}", file=sys.stderr, flush=True)
    text = json.dumps(shown.data, indent=2, default=str) if args.json else shown.text(Style(utc=args.utc))
    if text:
        try:
            print(text, flush=True)
        except BrokenPipeError:
            # The reader left (`| head`): say nothing more, and let no flush at exit raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    return shown.status


def _console(args: argparse.Namespace) -> Console:
    from ..console import UnknownWorker, standalone_console  # the console's model, without Flask's app

    environ = dict(os.environ)
    if args.redis_url:
        environ.pop("LOWKIQ_APP", None)  # an app from the environment is not what this command was given
    if args.app:
        environ["LOWKIQ_APP"] = args.app
    try:
        # --redis-url wins over the app's configure(), as it does for lowkiq -r.
        return standalone_console(environ, redis_timeout=REDIS_TIMEOUT, redis_url=args.redis_url)
    except (RuntimeError, UnknownWorker) as exc:
        raise OpsError(str(exc)) from exc


def _run(c: Console, args: argparse.Namespace) -> Shown:
    from ..console import BrokenWorker, UnknownWorker
    from ..console.listing import BadInput

    try:
        if args.command == "stats" and args.worker:
            from .groups_stats import stats as day_stats
            return Shown(*day_stats(c, args.worker, args.day))
        if args.command == "stats":
            if args.day:
                raise OpsError("--day needs a worker: lowkiq stats WORKER --day YYYY-MM-DD")
            return stats(c)
        if args.command == "groups":
            from .groups_stats import groups
            return Shown(*groups(c, args.words, who=_user()))
        if args.command == "servers":
            return servers(c)
        if args.command == "audit":
            return audit_log(c, _limit(args.limit))
        if args.command == "jobs" and args.jobs_command == "find":
            return find(c, args.id)
        if args.command == "jobs" and args.jobs_command == "history":
            return id_history(c, args.id, args.worker, _limit(args.limit))
        if args.command == "jobs" and args.jobs_command == "tagged":
            return tagged_jobs(c, args.tag, args.worker, _limit(args.limit), args.after)
        if args.command == "jobs" and args.jobs_command == "stop":
            return stop_perform(c, args)
        if args.command == "jobs" and args.jobs_command == "hot":
            return hot_ids(c, args.worker)
        if args.command == "jobs":
            return list_jobs(c, args)
        if args.command in ("pause", "resume"):
            return pause_or_resume(c, args.command, args.worker)
        if args.command == "schedules":
            return schedules(c, args.action, args.name)
        return morgue_action(c, args)
    except (BrokenWorker, BadInput) as exc:
        raise OpsError(str(exc)) from None
    except UnknownWorker as exc:
        known = ", ".join(v.name for v in c.workers()) or "none"
        raise OpsError(f"no worker {exc.name!r} in this Redis (known: {known})") from None


def stats(c: Console) -> Shown:
    rows, info, members = c.dashboard()
    data: dict[str, Any] = {
        "redis": c.redis_label,
        "servers": len(members),
        "workers": [{"worker": view.name, "length": m.length, "fresh": m.fresh, "retries": m.retries,
                     "busy": m.busy, "dead": m.morgue_length, "lag_seconds": round(m.lag, 3),
                     "processed": m.processed, "failed": m.failed,
                     "paused": m.paused.as_json() if m.paused else None} for view, m in rows],
        "broken": {entry.name: entry.problem for entry in c.broken()},
    }

    def text(style: Style) -> str:
        lines = [f"Redis: {human.cell(data['redis'])}, {human.plural(data['servers'], 'live server')}"]
        workers = data["workers"]
        if workers:
            lines.append(human.table(
                ["worker", "enqueued", "fresh", "retries", "busy", "dead", "lag", "processed", "failed", "paused"],
                [[w["worker"], human.count(w["length"]), human.count(w["fresh"]), human.count(w["retries"]),
                  human.count(w["busy"]), human.count(w["dead"]), human.duration(w["lag_seconds"]),
                  human.count(w["processed"]), human.count(w["failed"]), _paused(w["paused"], style)]
                 for w in workers],
                right=("enqueued", "fresh", "retries", "busy", "dead", "lag", "processed", "failed"),
                last_unclipped=True))
        elif not data["broken"]:
            lines.append("no worker known in this Redis yet: a server or a producer of the app registers its "
                         "workers when it starts")
        for name, problem in data["broken"].items():
            lines.append(f"broken registry entry {human.cell(name)}: {human.cell(problem, clip=False)}")
        return "\n".join(lines)

    return Shown(data, text)


def _paused(paused: dict[str, Any] | None, style: Style) -> str:
    if not paused:
        return "no"
    return f"since {style.when(paused['at'])} by {paused['who']} ({paused['source']})"


def servers(c: Console) -> Shown:
    from ..console.servers import live, server_json, worker_names

    names = worker_names(c)
    data = {"servers": [server_json(m, names) for m in live(c)]}

    def text(style: Style) -> str:
        if not data["servers"]:
            return "no live server"
        return human.table(
            ["server", "host", "pid", "threads", "state", "started", "heartbeat", "shards"],
            [[s["name"] or s["id"], s["host"], s["pid"], s["threads"], s["state"], style.when(s["started_at"]),
              style.when(s["heartbeat_at"]), _shards(s["shards"])] for s in data["servers"]],
            right=("pid", "threads"), last_unclipped=True)

    return Shown(data, text)


def _shards(by_worker: dict[str, list[int]]) -> str:
    """``Billing 0-2, 5; Mailer 0``: each worker's shard numbers, runs folded."""
    if not by_worker:
        return "none"
    parts = []
    for worker, indexes in by_worker.items():
        runs: list[list[int]] = []
        for i in sorted(indexes):
            if runs and i == runs[-1][1] + 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        parts.append(f"{worker} " + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs))
    return "; ".join(parts)


def _job(job: Any, where: str, worker: str) -> dict[str, Any]:
    data: dict[str, Any] = {"worker": worker, "where": where, "id": job.id,
                            "payloads": [[payload, score] for payload, score in job.payloads], "error": job.error}
    if where == "dead":
        data["updated_at"] = job.updated_at
    else:
        data["perform_in"] = job.perform_in
        data["retry_count"] = job.retry_count
    return data


def find(c: Console, job_id: str) -> Shown:
    found = [{**_job(f.job, f.where, f.view.name), "traceback": f.job.traceback} for f in c.find(job_id)]
    data = {"id": job_id, "found": found}
    if not found:
        known = ", ".join(v.name for v in c.workers()) or "none known"
        return Shown(data, lambda style: "", EXIT_NOT_FOUND,
                     f"no job with id {job_id!r} in any worker ({known}): not queued, busy or dead")

    def text(style: Style) -> str:
        return "\n\n".join(_job_text(job, style) for job in found)

    return Shown(data, text)


def id_history(c: Console, job_id: str, worker: str, limit: int) -> Shown:
    """The id's history in every worker whose history holds it (or in ``worker``), oldest event first."""
    from ..console import histories

    views = [c.worker(worker)] if worker else None
    found = [shown.as_json() for shown in histories.search(c, job_id, limit=limit, views=views)]
    data = {"id": job_id, "history": found}
    if not found:
        where = f"{worker}'s history" if worker else "any worker's history"
        return Shown(data, lambda style: "", EXIT_NOT_FOUND,
                     f"no event of id {job_id!r} in {where} (a history reaches back history_length entries per "
                     f"shard)")
    return Shown(data, lambda style: id_history_text.text(found, style))


def hot_ids(c: Console, worker: str) -> Shown:
    """The worker's hottest ids over the last hour, by each measure, and each shard's lag (lowkiq.console.hot)."""
    from ..console import hot

    view = c.worker(worker)
    data = hot.as_json(view, hot.hot_ids(c, view))

    def text(style: Style) -> str:
        lines = [f"{view.name} · since {style.when(data['since'])} · {human.count(data['examined'])} history "
                 f"entries read ({human.count(data['budget']['per_shard'])} per shard at most), "
                 f"{human.plural(data['ids_seen'], 'id')} seen"]
        if not data["whole_window"]:
            short = sum(not s["whole_window"] for s in data["shards"])
            lines.append(f"{human.INDENT}{short} shards reached their budget: counted over less than the hour")
        for key, title in (("by_versions", "most versions"), ("by_retries", "most retries"),
                           ("by_perform_time", "most perform time")):
            lines.append(f"{title}:")
            rows = data[key]
            if not rows:
                lines.append(f"{human.INDENT}none")
                continue
            lines.append(human.table(["id", "shard", "versions", "retries", "perform time"],
                                     [[r["id"], r["shard"], human.count(r["versions"]), human.count(r["retries"]),
                                       human.duration(r["perform_seconds"])] for r in rows],
                                     right=("shard", "versions", "retries", "perform time")))
        lines.append("shards:")
        lines.append(human.table(["shard", "queued", "lag", "oldest due id"],
                                 [[s["shard"], human.count(s["queued"]), human.duration(s["lag"]),
                                   "-" if s["oldest_id"] is None else s["oldest_id"]] for s in data["shards"]],
                                 right=("shard", "queued", "lag"), last_unclipped=True))
        return "\n".join(lines)

    return Shown(data, text)


def tagged_jobs(c: Console, tag: str, worker: str, limit: int, after: str) -> Shown:
    """The ids tagged ``tag`` in every worker (or in ``worker``), a page of each, read from the tag indexes."""
    if after and not worker:
        raise OpsError("--after goes on in one worker's pages: give it with --worker")
    views = [c.worker(worker)] if worker else c.workers()
    found: list[dict[str, Any]] = []
    for view in views:
        page = c.tagged(view, tag, limit=limit, after=after or None)
        if page.jobs or worker:
            found.append({"worker": view.name, "jobs": [job.as_json() for job in page.jobs], "next": page.next})
    data = {"tag": tag, "found": found}
    if not any(entry["jobs"] for entry in found):
        where = f"worker {worker}" if worker else "any worker"
        return Shown(data, lambda style: "", EXIT_NOT_FOUND, f"no id tagged {tag!r} in {where}")

    def text(style: Style) -> str:
        blocks = []
        for entry in found:
            jobs = entry["jobs"]
            rows = [[job["id"], ", ".join(w for w in ("queued", "busy", "dead") if job[w]), ", ".join(job["tags"])]
                    for job in jobs]
            block = (f"{entry['worker']}: {human.plural(len(jobs), 'id')} tagged {human.cell(tag, clip=False)}\n"
                     + human.table(["id", "where", "tags"], rows))
            if entry["next"]:
                block += (f"\nfor more, add: --worker {shlex.quote(entry['worker'])} "
                          f"--after {shlex.quote(entry['next'])}")
            blocks.append(block)
        return "\n\n".join(blocks)

    return Shown(data, text)


def _job_text(job: dict[str, Any], style: Style) -> str:
    """One job as a card: where it is, its times, its error, each payload on its line, the traceback below."""
    pairs = [("id", human.cell(job["id"], clip=False))]
    if job["where"] == "dead":
        pairs.append(("dead since", style.when(job["updated_at"])))
    else:
        pairs.append(("perform_in", style.when(job["perform_in"])))
        retries = job["retry_count"]
        pairs.append(("retry_count", f"{retries} (never failed)" if retries < 0 else str(retries)))
    if job["error"]:
        pairs.append(("error", human.cell(job["error"], clip=False)))
    lines = [f"{job['worker']}: {job['where']}", human.fields(pairs)]
    lines.append(f"{human.INDENT}{human.plural(len(job['payloads']), 'payload')}, oldest score first:")
    scores = [style.score(score) for _, score in job["payloads"]]
    width = max(map(len, scores), default=0)
    lines += [f"{human.INDENT * 2}{shown.ljust(width)}  {human.payload(value)}"
              for shown, (value, _) in zip(scores, job["payloads"])]
    if job.get("traceback"):
        lines += [f"{human.INDENT}traceback:", human.block(job["traceback"])]
    return "\n".join(lines)


def list_jobs(c: Console, args: argparse.Namespace) -> Shown:
    worker, kind, limit = args.worker, args.kind, _limit(args.limit)
    view = c.worker(worker)
    q = c.queries(view)
    content = _content(args)
    if kind == "busy":
        if args.filter or args.min or args.max or args.desc is not None or content or args.scan:
            raise OpsError("--filter, --min, --max, --desc, --asc and the content filters apply to --queued and "
                           "--dead, not --busy")
        jobs = [_job(j, "busy", worker) for j in q.busy()[:limit]]
        data: dict[str, Any] = {"worker": worker, "kind": kind, "jobs": jobs}
        return Shown(data, lambda style: _jobs_text(data, limit, style))
    from ..console import AREA_ORDERS

    orders, default, default_desc = AREA_ORDERS["enqueued" if kind == "queued" else "morgue"]
    shown = _listing(args, orders, default, default_desc=default_desc)
    if args.scan and not content:
        raise OpsError("--scan goes on with a content search: give it with --error-class, --error or --payload")
    if content:
        return _searched(c, view, kind, shown, content, args.scan, limit)
    query = q.enqueued if kind == "queued" else q.morgue
    page = query(shown.order_by, desc=shown.desc, min=shown.min or None, max=shown.max or None, limit=limit)
    jobs = [_job(j, kind, worker) for j in page.rows]
    # "order": what the jobs are listed by, as the console's sort says it (the jobs come in that order).
    data = {"worker": worker, "kind": kind, "jobs": jobs, "order": {"by": shown.order_by, "desc": shown.desc},
            **_filter_json(shown)}
    scope = (f", {_scope_text(shown)}" if shown.min or shown.max else "") + f", {_order_text(shown)}"
    return Shown(data, lambda style: _jobs_text(data, limit, style, scope))


# How people say a listing's order; any other is "by FIELD", with ", descending" when it descends.
ORDER_WORDS = {("updated_at", True): "newest first", ("updated_at", False): "oldest first",
               ("perform_in", False): "soonest due first", ("perform_in", True): "latest due first"}


def _order_text(shown: Any) -> str:
    return ORDER_WORDS.get((shown.order_by, shown.desc)) or f"by {shown.order_by}" + (
        ", descending" if shown.desc else "")


def _searched(c: Console, view: Any, kind: str, shown: Any, content: Any, scan: str, limit: int) -> Shown:
    """A page of a content search: it examines a bounded number of jobs, so it may show fewer than --limit
    while more follow; it says how far it got and the --scan that goes on."""
    from ..console.terms import Continuation

    try:
        after = Continuation.decode(scan) if scan else None
    except ValueError as exc:
        raise OpsError(f"--scan: {exc}") from None
    area = "enqueued" if kind == "queued" else "morgue"
    try:
        rows, found = c.search(view, area, content, limit=limit, after=after, order_by=shown.order_by,
                               min=shown.min or None, max=shown.max or None)
    except ValueError as exc:
        raise OpsError(str(exc)) from None
    jobs = [_job(j, kind, view.name) for j in rows]
    following = found.next.encode() if found.next else None
    data = {"worker": view.name, "kind": kind, "jobs": jobs, **_filter_json(shown),
            "content": _content_json(content),
            "scan": {"examined": found.examined, "total": found.total, "continue": following}}
    scope = f", {content.describe()}" + (f", {_scope_text(shown)}" if shown.min or shown.max else "")

    def text(style: Style) -> str:
        head = _jobs_text(data, -1, style, scope)
        progress = f"examined {found.examined:,} of {found.total:,} jobs"
        if following is None:
            return f"{head}\n{progress}: the search is done"
        return f"{head}\n{progress}; for more, add: --scan {shlex.quote(following)}"

    return Shown(data, text)


def _jobs_text(data: dict[str, Any], limit: int, style: Style, scope: str = "") -> str:
    jobs, kind = data["jobs"], data["kind"]
    more = f" (the first {limit:,}: --limit shows more)" if len(jobs) == limit else ""
    head = f"{data['worker']}: {human.plural(len(jobs), f'{kind} job')}{scope}{more}"
    if not jobs:
        return head
    when = "dead since" if kind == "dead" else "perform_in"
    headers = ["id", when] + ([] if kind == "dead" else ["retries"]) + ["payloads", "newest payload", "error"]
    rows = []
    for job in jobs:
        at = job["updated_at"] if kind == "dead" else job["perform_in"]
        retries = [] if kind == "dead" else [str(job["retry_count"])]
        newest = human.payload(job["payloads"][-1][0]) if job["payloads"] else ""
        rows.append([job["id"], style.when(at), *retries, human.count(len(job["payloads"])), newest,
                     job["error"] or ""])
    return head + "\n" + human.table(headers, rows, right=("retries", "payloads"))


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise OpsError(f"--limit must be 1..{MAX_LIMIT}, got {limit}")
    return limit


def _listing(args: argparse.Namespace, orders: tuple[str, ...], default: str, *, default_desc: bool = False) -> Any:
    """The console's filter and sort from --filter/--min/--max and --desc/--asc, with the console's validation
    (BadInput): without either, ``default`` goes in ``default_desc``'s direction, another field ascends."""
    from ..console import listing

    if (args.min or args.max) and not args.filter:
        raise OpsError("--min and --max need --filter FIELD")
    if args.filter and args.filter not in orders:
        raise OpsError(f"--filter must be one of {', '.join(orders)}, got {args.filter!r}")
    desc = getattr(args, "desc", None)
    return listing.parse({"order_by": args.filter or default, "min": args.min, "max": args.max,
                          "desc": "" if desc is None else "1" if desc else "0"}, orders,
                         default_order=default, default_desc=default_desc, default_limit=1)


def _filter_json(shown: Any) -> dict[str, Any]:
    if not (shown.min or shown.max):
        return {}
    return {"filter": {"field": shown.order_by, "min": shown.min or None, "max": shown.max or None}}


def _scope_text(shown: Any) -> str:
    return f"{shown.order_by} from {shown.min or 'the first'} to {shown.max or 'the last'}"


def stop_perform(c: Console, args: argparse.Namespace) -> Shown:
    """Ask the server performing a busy job to stop it, as the console's Stop button does, audited."""
    from ..console import busy

    view = c.worker(args.worker)
    if busy.stoppable(view):
        _ask(args, f"stop the perform of job {args.id!r} of {view.name} (its whole batch fails with PerformStopped)",
             1)
    try:
        busy.stop(c, view, args.id, who=_user(), source="cli")
    except busy.StopRefused as exc:
        if exc.reason == "not_busy":
            return Shown({"worker": view.name, "id": args.id, "stop": "not_busy"}, lambda style: "", EXIT_NOT_FOUND,
                         str(exc))
        raise OpsError(str(exc)) from None
    data = {"worker": view.name, "id": args.id, "stop": "requested"}
    return Shown(data, lambda style: f"stopping job {human.cell(args.id)} of {view.name}: its server kills the "
                                     "perform's child process within about a second, and the batch fails with "
                                     "PerformStopped (the retry rules apply)")


def pause_or_resume(c: Console, verb: str, worker: str) -> Shown:
    from ..console.worker_pause import set_paused

    view, changed = set_paused(c, worker, verb, who=_user(), source="cli")
    data = {"worker": view.name, "paused": verb == "pause", "changed": changed}
    if verb == "pause":
        said = (f"{view.name} paused: servers stop taking its jobs within a heartbeat; enqueueing goes on"
                if changed else f"{view.name} was paused already")
    else:
        said = f"{view.name} resumed: servers take its jobs again" if changed else f"{view.name} was not paused"
    return Shown(data, lambda style: said)


def schedules(c: Console, action: str | None, name: str | None) -> Shown:
    """Every schedule (name, worker, rule, next and last tick, paused), or an audited action on one."""
    from ..console.schedules import UnknownSchedule, from_app

    board = from_app(c.client)
    if action is None:
        if name is not None:
            raise OpsError("lowkiq schedules [pause|resume|run NAME]: say what to do with the schedule")
        # Times as unix seconds, as api/v1/schedules gives them.
        rows = [{"name": row.info.name, "worker": row.info.worker, "rule": row.info.rule.words(),
                 "next_at": row.next_at, "last_at": row.state.last_at,
                 "last_outcome": row.state.outcome or None, "paused": row.state.paused}
                for row in board.rows()]
        return Shown(rows, lambda style: _schedules_text(rows, style))
    if name is None:
        raise OpsError(f"lowkiq schedules {action} NAME: which schedule?")
    try:
        if action == "run":
            at = board.run_now(name, who=_user(), source="cli")
            return Shown({"schedule": name, "enqueued": True, "scheduled_at": at},
                         lambda style: f"schedule {name}: its job is enqueued now (scheduled_at {style.when(at)})")
        changed = (board.pause if action == "pause" else board.resume)(name, who=_user(), source="cli")
    except UnknownSchedule as exc:
        known = ", ".join(i.name for i in board.infos()) or "none"
        raise OpsError(f"{exc} (known: {known})") from None
    done = "paused" if action == "pause" else "resumed"
    said = f"schedule {name} {done}" if changed else f"schedule {name} was {done} already"
    return Shown({"schedule": name, "paused": action == "pause", "changed": changed}, lambda style: said)


def _schedules_text(rows: list[dict[str, Any]], style: Style) -> str:
    if not rows:
        return "no schedule: the app configures them with lowkiq.configure(schedules=[...])"
    return human.table(
        ["schedule", "worker", "rule", "next tick", "last enqueued", "last outcome", "paused"],
        [[r["name"], r["worker"], r["rule"], "- (paused)" if r["paused"] else style.when(r["next_at"]),
          style.when(r["last_at"]), r["last_outcome"] or "-", "yes" if r["paused"] else "no"] for r in rows])


def audit_log(c: Console, limit: int) -> Shown:
    entries = [entry.as_json() for entry in read_audit_log(c, limit)]

    def text(style: Style) -> str:
        if not entries:
            return "no operator action recorded yet"
        return human.table(
            ["at", "who", "source", "action", "worker", "count", "scope", "ids"],
            [[style.when(e["at"]), e["who"], e["source"], e["action"], e["worker"], human.count(e["count"]),
              e["scope"] or "-", _ids(e["ids"], e["ids_total"])] for e in entries],
            right=("count",))

    return Shown(entries, text)


def _ids(ids: list[str], total: int) -> str:
    if not ids and not total:
        return "-"
    shown = ", ".join(ids[:5])
    rest = max(total, len(ids)) - min(len(ids), 5)
    return shown + (f" and {rest:,} more" if rest > 0 else "")


def morgue_action(c: Console, args: argparse.Namespace) -> Shown:
    """Requeue or delete dead jobs: given ids, or those a filter (or --all) matches.

    A filter's jobs are counted first (the dry run), and the action touches exactly the jobs
    counted, of them those that still match: never one that came to match after the count.
    """
    content = _content(args)
    if not (args.ids or args.filter or args.all or content):
        raise OpsError("say which dead jobs: --ids, --filter FIELD, --all, or a content filter (--error-class, "
                       "--error, --payload)")
    if content and (args.ids or args.all):
        raise OpsError("content filters go with --filter or alone, not with --ids or --all")
    view = c.worker(args.worker)
    if (args.min or args.max) and not args.filter:
        raise OpsError("--min and --max need --filter FIELD")
    verb = "requeue" if args.action == "requeue" else "delete"
    if args.ids:
        return _morgue_ids(c, view, verb, args)
    shown = _listing(args, MORGUE_ORDERS, "updated_at") if args.filter else None
    order_by = shown.order_by if shown else "updated_at"
    bounds: dict[str, Any] = {"min": (shown.min or None) if shown else None,
                              "max": (shown.max or None) if shown else None, "content": content}
    described = [part for part in (_scope_text(shown) if shown else "", content.describe()) if part]
    scope = f"the dead jobs with {', '.join(described)}" if described else "every dead job"
    filtered = {**(_filter_json(shown) if shown else {}),
                **({"content": _content_json(content)} if content else {})}
    token = args.confirm
    if token is None:
        pending = c.count_matching(view, "morgue", verb, order_by, **bounds)
        if args.dry_run:
            data = {"worker": view.name, "action": f"morgue/{verb}", "dry_run": True, "would_touch": pending.count,
                    "sample": pending.sample, "confirm": pending.token, **filtered}
            again = _command_line(args, confirm=pending.token)
            return Shown(data, lambda style: _dry_run_text(verb, view.name, scope, pending.count, pending.sample)
                         + f"\nto do it, within 10 minutes (once; it acts on exactly these jobs, of them those that "
                           f"still match):\n{human.INDENT}{again}")
        _ask(args, f"{verb} {scope} of {view.name}: {pending.count:,} jobs", pending.count)
        token = pending.token
    started = time.monotonic()
    action = f"morgue/{verb}_matching" if described else f"morgue/{verb}"
    try:
        done = c.act_on_counted(view, "morgue", verb, order_by, token, who=_user(), source="cli", action=action,
                                scope=", ".join(described) or "all", **bounds)
    except ConfirmationRefused as exc:
        raise OpsError(f"nothing done: {exc}") from None
    seconds = round(time.monotonic() - started, 3)
    data = {"worker": view.name, "action": action, "touched": done.touched, "counted": done.counted,
            "skipped": done.skipped, "seconds": seconds, **filtered}
    skipped = (f"; {human.plural(done.skipped, 'job')} of the {done.counted:,} counted no longer matched"
               if done.skipped else "")
    return Shown(data, lambda style: f"{_past(verb)} {human.plural(done.touched, 'dead job')} of {view.name} "
                                     f"({scope}) in {human.duration(seconds)}{skipped}")


def _past(verb: str) -> str:
    return "requeued" if verb == "requeue" else "deleted"


def _dry_run_text(verb: str, worker: str, scope: str, would: int, sample: list[str]) -> str:
    """What a dry run would touch: the count, then some of the ids, one a line."""
    head = f"dry run: would {verb} {human.plural(would, 'dead job')} of {worker} ({scope})"
    if not sample:
        return head + "; nothing touched"
    more = f"\n{human.INDENT}and {would - len(sample):,} more" if would > len(sample) else ""
    ids = "\n".join(f"{human.INDENT}{human.cell(i)}" for i in sample)
    return f"{head}; nothing touched. {'Some of them' if more else 'They are'}:\n{ids}{more}"


def _command_line(args: argparse.Namespace, *, confirm: str) -> str:
    """The command that confirms a dry run: the same worker, action and filter, with --confirm."""
    words = ["lowkiq", "morgue", args.action, args.worker]
    if args.filter:
        words += ["--filter", args.filter] + (["--min", args.min] if args.min else []) + \
                 (["--max", args.max] if args.max else [])
    for option in ("error_class", "error", "payload"):
        if getattr(args, option) is not None:
            words += [f"--{option.replace('_', '-')}", getattr(args, option)]
    if args.match_case:
        words.append("--match-case")
    if args.all:
        words.append("--all")
    for option in ("redis_url", "app"):
        # Only a value with no password in it is repeated; a URL with one is left for the operator to add.
        value = getattr(args, option)
        if value and not (option == "redis_url" and "@" in value):
            words += [f"--{option.replace('_', '-')}", value]
    return shlex.join([*words, "--confirm", confirm])


def _morgue_ids(c: Console, view: Any, verb: str, args: argparse.Namespace) -> Shown:
    ids = list(dict.fromkeys(args.ids))  # an id given twice is one job
    if args.confirm is not None:
        raise OpsError("--confirm goes with --filter or --all (a dry run's count), not with --ids")
    found = [job.id for job in c.queries(view).morgue_jobs(ids)]
    dead = len(found)
    scope = f"of the {len(ids):,} ids given" + (", the others are not dead jobs" if dead < len(ids) else "")
    if args.dry_run:
        data = {"worker": view.name, "action": f"morgue/{verb}", "dry_run": True, "would_touch": dead}
        return Shown(data, lambda style: _dry_run_text(verb, view.name, scope, dead, found[:SAMPLE]))
    _ask(args, f"{verb} {dead:,} of the {len(ids):,} ids given (the others are not dead jobs) of {view.name}", dead)
    actions = c.actions(view, _user())
    started = time.monotonic()
    touched = actions.morgue_requeue(ids) if verb == "requeue" else actions.morgue_delete(ids)
    record_action(c, who=_user(), source="cli", action=f"morgue/{verb}", worker=view.name, count=touched, ids=ids)
    seconds = round(time.monotonic() - started, 3)
    data = {"worker": view.name, "action": f"morgue/{verb}", "touched": touched, "seconds": seconds}
    return Shown(data, lambda style: f"{_past(verb)} {human.plural(touched, 'dead job')} of {view.name} ({scope}) "
                                     f"in {human.duration(seconds)}")


def _ask(args: argparse.Namespace, question: str, count: int) -> None:
    """Go on when --yes was given or the operator types yes; else OpsError."""
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise OpsError(f"{question}: add --yes to confirm (stdin is not a terminal)")
    try:
        answer = input(f"{question}. Type yes to go on: ")
    except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C at the prompt: a "no"
        print(file=sys.stderr)
        answer = ""
    if answer.strip().lower() != "yes":
        raise OpsError("nothing done")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"
