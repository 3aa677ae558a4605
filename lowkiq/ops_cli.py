"""``lowkiq stats|servers|jobs|morgue|audit``: what the console shows and does, from a shell.

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

from . import audit
from .transport import TopologyError

if TYPE_CHECKING:
    from .webui.console import Console

EXIT_USAGE = 2
REDIS_TIMEOUT = 5.0


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
    morgue = sub.add_parser("morgue", parents=[common], help="requeue or delete dead jobs")
    morgue.add_argument("action", choices=["requeue", "delete"])
    morgue.add_argument("worker")
    scope = morgue.add_mutually_exclusive_group(required=True)
    scope.add_argument("--ids", nargs="+", metavar="ID", help="these dead jobs")
    scope.add_argument("--all", action="store_true", help="every dead job of the worker")
    morgue.add_argument("--dry-run", action="store_true", help="count what would be touched, touch nothing")
    morgue.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    log = sub.add_parser("audit", parents=[common], help="the newest operator actions")
    log.add_argument("--limit", type=int, default=50)
    return p


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
        print(json.dumps(result, indent=2, default=str) if args.json else _table(result))
    return 0


def _console(args: argparse.Namespace) -> Console:
    from .webui.console import UnknownWorker, standalone_console  # the console's model, without Flask's app

    environ = dict(os.environ)
    if args.redis_url:
        environ["LOWKIQ_REDIS_URL"] = args.redis_url
        environ.pop("LOWKIQ_APP", None)
    if args.app:
        environ["LOWKIQ_APP"] = args.app
    try:
        return standalone_console(environ, redis_timeout=REDIS_TIMEOUT)
    except (RuntimeError, UnknownWorker) as exc:
        raise OpsError(str(exc)) from exc


def _run(c: Console, args: argparse.Namespace) -> Any:
    from .webui.console import BrokenWorker, UnknownWorker

    try:
        if args.command == "stats":
            return stats(c)
        if args.command == "servers":
            return servers(c)
        if args.command == "audit":
            return [entry.as_json() for entry in audit.read(c.client, args.limit)]
        if args.command == "jobs" and args.jobs_command == "find":
            return find(c, args.id)
        if args.command == "jobs":
            return list_jobs(c, args.worker, args.kind, args.limit)
        return morgue_action(c, args)
    except BrokenWorker as exc:
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
                     "processed": m.processed, "failed": m.failed} for view, m in rows],
        "broken": {entry.name: entry.problem for entry in c.broken()},
    }


def servers(c: Console) -> dict[str, Any]:
    from . import ownership
    from .webui.servers import server_json, worker_names

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
    return {"id": job_id, "found": [_job(f.job, f.where, f.view.name) for f in c.find(job_id)]}


def list_jobs(c: Console, worker: str, kind: str, limit: int) -> dict[str, Any]:
    if not 1 <= limit <= 1000:
        raise OpsError(f"--limit must be 1..1000, got {limit}")
    view = c.worker(worker)
    q = c.queries(view)
    if kind == "queued":
        jobs = [_job(j, "queued", worker) for j in q.enqueued(limit=limit).rows]
    elif kind == "dead":
        jobs = [_job(j, "dead", worker) for j in q.morgue(limit=limit).rows]
    else:
        jobs = [_job(j, "busy", worker) for j in q.busy()[:limit]]
    return {"worker": worker, "kind": kind, "jobs": jobs}


def morgue_action(c: Console, args: argparse.Namespace) -> dict[str, Any] | None:
    view = c.worker(args.worker)
    if args.all:
        touched = next(m.morgue_length for v, m in c.metrics([view], full=False))
        scope = "every dead job"
    else:
        touched = len(c.queries(view).morgue_jobs(args.ids))
        scope = f"{touched:,} of the {len(args.ids):,} ids given (the others are not dead jobs)"
    verb = "requeue" if args.action == "requeue" else "delete"
    if args.dry_run:
        return {"worker": view.name, "action": f"morgue/{verb}", "dry_run": True, "would_touch": touched}
    if not args.yes:
        if not sys.stdin.isatty():
            raise OpsError(f"{verb} {touched:,} dead jobs of {view.name}: add --yes to confirm (stdin is not a terminal)")
        answer = input(f"{verb} {scope} of {view.name}: {touched:,} jobs. Type yes to go on: ")
        if answer.strip().lower() != "yes":
            raise OpsError("nothing done")
    actions = c.actions(view)
    started = time.monotonic()
    if args.all:
        count = actions.morgue_requeue_all() if verb == "requeue" else actions.morgue_delete_all()
    else:
        count = actions.morgue_requeue(args.ids) if verb == "requeue" else actions.morgue_delete(args.ids)
    audit.record(c.client, who=_user(), source="cli", action=f"morgue/{verb}", worker=view.name, count=count,
                 ids=[] if args.all else list(args.ids), scope="all" if args.all else "")
    return {"worker": view.name, "action": f"morgue/{verb}", "touched": count,
            "seconds": round(time.monotonic() - started, 3)}


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
            lines.append(f"{key}: " + ", ".join(f"{k}: {v}" for k, v in value.items()))
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _rows(rows: list[Any]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]
    out = ["  " + "  ".join(col.ljust(w) for col, w in zip(columns, widths))]
    out += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
