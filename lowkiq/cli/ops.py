"""``lowkiq stats|servers|jobs|morgue|pause|resume|schedules|audit``: what the console shows and does, from a shell.

They read the same Redis as the console (``--redis-url``, ``--app``, else
LOWKIQ_APP, LOWKIQ_REDIS_URL, REDIS_URL, else the embedded Redis) through the same
console model, so answers and validation match the pages. Tables for people,
``--json`` for scripts. A destructive action asks for confirmation unless
``--yes``, ``--dry-run`` counts what it would touch, and every action done is
recorded in the audit log (source "cli", the user from $USER).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from ..log_format import visible
from ..store import audit
from ..store.confirmations import ConfirmationRefused
from ..store.queries import ENQUEUED_ORDERS, MORGUE_ORDERS
from ..transport import TopologyError

if TYPE_CHECKING:
    from ..console import Console

EXIT_USAGE = 2
REDIS_TIMEOUT = 5.0
MAX_LIMIT = 1000  # as the console's pages and API


class OpsError(Exception):
    """One line for the operator, exit status 2."""


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--redis-url", metavar="URL", help="Redis to use (default: LOWKIQ_REDIS_URL, REDIS_URL, "
                        "else the embedded Redis of ./.lowkiq)")
    common.add_argument("--app", metavar="APP.py", help="the app file, for its Redis and serializers (LOWKIQ_APP)")
    common.add_argument("--json", action="store_true", help="JSON for scripts instead of a table")
    p = argparse.ArgumentParser(prog="lowkiq", description="Operate lowkiq's queues from a shell.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("stats", parents=[common], help="every worker's numbers and the live servers")
    sub.add_parser("servers", parents=[common], help="live server processes and the shards each holds")
    jobs = sub.add_parser("jobs", parents=[common], help="find a job by id, or list a worker's jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True)
    find = jobs_sub.add_parser("find", parents=[common], help="an id in every worker: queued, busy, dead")
    find.add_argument("id")
    listing = jobs_sub.add_parser("list", parents=[common], help="a worker's queued, busy or dead jobs")
    listing.add_argument("worker")
    which = listing.add_mutually_exclusive_group(required=True)
    for kind in ("queued", "busy", "dead"):
        which.add_argument(f"--{kind}", dest="kind", action="store_const", const=kind)
    listing.add_argument("--limit", type=int, default=50, help="jobs at most (default 50)")
    _filter_arguments(listing, "queued: id, perform_in or retry_count; dead: id or updated_at")
    listing.add_argument("--desc", action="store_true", help="the highest first")
    morgue = sub.add_parser("morgue", parents=[common], help="requeue or delete dead jobs")
    morgue.add_argument("action", choices=["requeue", "delete"])
    morgue.add_argument("worker")
    scope = morgue.add_mutually_exclusive_group(required=True)
    scope.add_argument("--ids", nargs="+", metavar="ID", help="these dead jobs")
    scope.add_argument("--filter", metavar="FIELD", choices=MORGUE_ORDERS,
                       help="the dead jobs whose FIELD (id or updated_at) is within --min..--max, as the console's "
                            "filter")
    scope.add_argument("--all", action="store_true", help="every dead job of the worker")
    _bounds_arguments(morgue)
    morgue.add_argument("--dry-run", action="store_true", help="count what would be touched, touch nothing; with "
                        "--filter or --all, also print a token that --confirm takes within 10 minutes")
    morgue.add_argument("--confirm", metavar="TOKEN", help="act on exactly the jobs an earlier --dry-run counted "
                        "(same worker, action and filter), without asking")
    morgue.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    for verb, text in (("pause", "stop servers taking a worker's jobs (enqueueing goes on)"),
                       ("resume", "let servers take a paused worker's jobs again")):
        sub.add_parser(verb, parents=[common], help=text).add_argument("worker")
    schedules = sub.add_parser("schedules", parents=[common], help="recurring schedules: list them, or pause, resume "
                               "or run one now")
    schedules.add_argument("action", nargs="?", choices=["pause", "resume", "run"],
                           help="pause: no tick is enqueued until resumed; run: enqueue its job now (also paused)")
    schedules.add_argument("name", nargs="?", help="the schedule's name")
    log = sub.add_parser("audit", parents=[common], help="the newest operator actions")
    log.add_argument("--limit", type=int, default=50)
    return p


def _filter_arguments(p: argparse.ArgumentParser, fields: str) -> None:
    p.add_argument("--filter", metavar="FIELD", help=f"order and filter by FIELD ({fields}); with --min/--max")
    _bounds_arguments(p)


def _bounds_arguments(p: argparse.ArgumentParser) -> None:
    for bound in ("min", "max"):
        p.add_argument(f"--{bound}", default="", metavar="VALUE",
                       help=f"the {'lowest' if bound == 'min' else 'highest'} FIELD kept, inclusive: an id, a number, "
                            "or for times a unix time or a local date like '2026-11-24 03:00'")


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        console = _console(args)
        result = _run(console, args)
    except OpsError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (redis.RedisError, TopologyError, OSError, ValueError) as exc:
        print(f"lowkiq: Redis: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if result is not None:
        try:
            print(json.dumps(result, indent=2, default=str) if args.json else _table(result), flush=True)
        except BrokenPipeError:
            # The reader left (`| head`): say nothing more, and let no flush at exit raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    return 0


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


def _run(c: Console, args: argparse.Namespace) -> Any:
    from ..console import BrokenWorker, UnknownWorker
    from ..console.listing import BadInput

    try:
        if args.command == "stats":
            return stats(c)
        if args.command == "servers":
            return servers(c)
        if args.command == "audit":
            return [entry.as_json() for entry in audit.read(c.client, _limit(args.limit))]
        if args.command == "jobs" and args.jobs_command == "find":
            return find(c, args.id)
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


def stats(c: Console) -> dict[str, Any]:
    rows, info, members = c.dashboard()
    return {
        "redis": c.redis_label,
        "servers": len(members),
        "workers": [{"worker": view.name, "length": m.length, "fresh": m.fresh, "retries": m.retries,
                     "busy": m.busy, "dead": m.morgue_length, "lag_seconds": round(m.lag, 3),
                     "processed": m.processed, "failed": m.failed,
                     "paused": m.paused.as_json() if m.paused else None} for view, m in rows],
        "broken": {entry.name: entry.problem for entry in c.broken()},
    }


def servers(c: Console) -> dict[str, Any]:
    from ..console.servers import server_json, worker_names
    from ..store import ownership

    names = worker_names(c)
    return {"servers": [server_json(m, names) for m in ownership.live(c.client)]}


def _job(job: Any, where: str, worker: str) -> dict[str, Any]:
    data: dict[str, Any] = {"worker": worker, "where": where, "id": job.id,
                            "payloads": [[payload, score] for payload, score in job.payloads], "error": job.error}
    if where == "dead":
        data["updated_at"] = job.updated_at
    else:
        data["perform_in"] = job.perform_in
        data["retry_count"] = job.retry_count
    return data


def find(c: Console, job_id: str) -> dict[str, Any]:
    found = [{**_job(f.job, f.where, f.view.name), "traceback": f.job.traceback} for f in c.find(job_id)]
    return {"id": job_id, "found": found}


def list_jobs(c: Console, args: argparse.Namespace) -> dict[str, Any]:
    worker, kind, limit = args.worker, args.kind, _limit(args.limit)
    view = c.worker(worker)
    q = c.queries(view)
    if kind == "busy":
        if args.filter or args.min or args.max or args.desc:
            raise OpsError("--filter, --min, --max and --desc apply to --queued and --dead, not --busy")
        jobs = [_job(j, "busy", worker) for j in q.busy()[:limit]]
        return {"worker": worker, "kind": kind, "jobs": jobs}
    orders, default = (ENQUEUED_ORDERS, "perform_in") if kind == "queued" else (MORGUE_ORDERS, "updated_at")
    shown = _listing(args, orders, default)
    query = q.enqueued if kind == "queued" else q.morgue
    page = query(shown.order_by, desc=args.desc, min=shown.min or None, max=shown.max or None, limit=limit)
    jobs = [_job(j, kind, worker) for j in page.rows]
    return {"worker": worker, "kind": kind, "jobs": jobs, **_filter_json(shown)}


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise OpsError(f"--limit must be 1..{MAX_LIMIT}, got {limit}")
    return limit


def _listing(args: argparse.Namespace, orders: tuple[str, ...], default: str) -> Any:
    """The console's filter from --filter/--min/--max, with the console's validation (BadInput)."""
    from ..console import listing

    if (args.min or args.max) and not args.filter:
        raise OpsError("--min and --max need --filter FIELD")
    if args.filter and args.filter not in orders:
        raise OpsError(f"--filter must be one of {', '.join(orders)}, got {args.filter!r}")
    return listing.parse({"order_by": args.filter or default, "min": args.min, "max": args.max}, orders,
                         default_order=default, default_limit=1)


def _filter_json(shown: Any) -> dict[str, Any]:
    if not (shown.min or shown.max):
        return {}
    return {"filter": {"field": shown.order_by, "min": shown.min or None, "max": shown.max or None}}


def _scope_text(shown: Any) -> str:
    return f"{shown.order_by} from {shown.min or 'the first'} to {shown.max or 'the last'}"


def pause_or_resume(c: Console, verb: str, worker: str) -> dict[str, Any]:
    from ..store import pausing

    view = c.worker(worker)
    change = pausing.pause if verb == "pause" else pausing.resume
    changed = change(c.client, view.info.queue_name, worker=view.name, who=_user(), source="cli")
    return {"worker": view.name, "paused": verb == "pause", "changed": changed}


def schedules(c: Console, action: str | None, name: str | None) -> Any:
    """Every schedule (name, worker, rule, next and last tick, paused), or an audited action on one."""
    from ..console.schedules import UnknownSchedule, from_app

    board = from_app(c.client)
    if action is None:
        if name is not None:
            raise OpsError("lowkiq schedules [pause|resume|run NAME]: say what to do with the schedule")
        return [{"name": row.info.name, "worker": row.info.worker, "rule": row.info.rule.words(),
                 "next_at": _when(row.next_at), "last_at": _when(row.state.last_at),
                 "last_outcome": row.state.outcome or None, "paused": row.state.paused}
                for row in board.rows()]
    if name is None:
        raise OpsError(f"lowkiq schedules {action} NAME: which schedule?")
    try:
        if action == "run":
            at = board.run_now(name, who=_user(), source="cli")
            return {"schedule": name, "enqueued": True, "scheduled_at": at}
        changed = (board.pause if action == "pause" else board.resume)(name, who=_user(), source="cli")
    except UnknownSchedule as exc:
        known = ", ".join(i.name for i in board.infos()) or "none"
        raise OpsError(f"{exc} (known: {known})") from None
    return {"schedule": name, "paused": action == "pause", "changed": changed}


def _when(at: float | None) -> str | None:
    """A unix time as people read it here (UTC, ISO 8601); --json keeps these strings too."""
    if at is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def morgue_action(c: Console, args: argparse.Namespace) -> dict[str, Any] | None:
    """Requeue or delete dead jobs: given ids, or those a filter (or --all) matches.

    A filter's jobs are counted first (the dry run), and the action touches exactly the jobs
    counted, of them those that still match: never one that came to match after the count.
    """
    view = c.worker(args.worker)
    if (args.min or args.max) and not args.filter:
        raise OpsError("--min and --max need --filter FIELD")
    verb = "requeue" if args.action == "requeue" else "delete"
    if args.ids:
        return _morgue_ids(c, view, verb, args)
    shown = _listing(args, MORGUE_ORDERS, "updated_at") if args.filter else None
    order_by = shown.order_by if shown else "updated_at"
    bounds = {"min": (shown.min or None) if shown else None, "max": (shown.max or None) if shown else None}
    scope = f"the dead jobs with {_scope_text(shown)}" if shown else "every dead job"
    filtered = _filter_json(shown) if shown else {}
    token = args.confirm
    if token is None:
        pending = c.count_matching(view, "morgue", verb, order_by, **bounds)
        if args.dry_run:
            return {"worker": view.name, "action": f"morgue/{verb}", "dry_run": True, "would_touch": pending.count,
                    "sample": pending.sample, "confirm": pending.token, **filtered}
        _ask(args, f"{verb} {scope} of {view.name}: {pending.count:,} jobs", pending.count)
        token = pending.token
    started = time.monotonic()
    try:
        done = c.act_on_counted(view, "morgue", verb, order_by, token, **bounds)
    except ConfirmationRefused as exc:
        raise OpsError(f"nothing done: {exc}") from None
    action = f"morgue/{verb}_matching" if shown else f"morgue/{verb}"
    audit.record(c.client, who=_user(), source="cli", action=action, worker=view.name, count=done.touched,
                 scope=_scope_text(shown) if shown else "all")
    return {"worker": view.name, "action": action, "touched": done.touched, "counted": done.counted,
            "skipped": done.skipped, "seconds": round(time.monotonic() - started, 3), **filtered}


def _morgue_ids(c: Console, view: Any, verb: str, args: argparse.Namespace) -> dict[str, Any]:
    ids = list(dict.fromkeys(args.ids))  # an id given twice is one job
    if args.confirm is not None:
        raise OpsError("--confirm goes with --filter or --all (a dry run's count), not with --ids")
    dead = len(c.queries(view).morgue_jobs(ids))
    if args.dry_run:
        return {"worker": view.name, "action": f"morgue/{verb}", "dry_run": True, "would_touch": dead}
    _ask(args, f"{verb} {dead:,} of the {len(ids):,} ids given (the others are not dead jobs) of {view.name}", dead)
    actions = c.actions(view)
    started = time.monotonic()
    count = actions.morgue_requeue(ids) if verb == "requeue" else actions.morgue_delete(ids)
    audit.record(c.client, who=_user(), source="cli", action=f"morgue/{verb}", worker=view.name, count=count, ids=ids)
    return {"worker": view.name, "action": f"morgue/{verb}", "touched": count,
            "seconds": round(time.monotonic() - started, 3)}


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


def _table(result: Any) -> str:
    """A plain-text rendering for people: the rows of the result's list, else its fields."""
    if isinstance(result, list):
        return _rows(result) if result else "(none)"
    lines = []
    for key, value in result.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines.append(_rows(value) if value else "  (none)")
        elif isinstance(value, dict) and value:
            lines.append(f"{key}: " + ", ".join(f"{k}: {visible(str(v))}" for k, v in value.items()))
        else:
            lines.append(f"{key}: {visible(str(value))}")
    return "\n".join(lines)


def _rows(rows: list[Any]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]
    out = ["  " + "  ".join(col.ljust(w) for col, w in zip(columns, widths))]
    out += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def _cell(value: Any) -> str:
    text = visible(value if isinstance(value, str) else json.dumps(value, default=str))
    return text if len(text) <= 60 else text[:57] + "..."
