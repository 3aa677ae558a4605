"""What the console knows of servers: the live processes and the shards each holds, a worker's shard
leases (who performs a busy job, since when), and the workers whose due work has nobody to process it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import Settings
from ..store import codec, membership, ownership
from ..store.membership import Member
from ..store.ownership import ShardLease
from . import Console, WorkerView


def long_perform_seconds() -> float:
    """The threshold the app configured (``long_perform``), else the default."""
    from .. import runtime

    current = runtime._current
    return current.settings.long_perform if current is not None else Settings.long_perform


def live(c: Console) -> list[Member]:
    """The live server processes, each with the shards it holds (from their heartbeats)."""
    return membership.live(c.client)


def worker_names(c: Console) -> dict[str, str]:
    """queue name -> worker name, for the workers this console knows."""
    return {view.info.queue_name: view.name for view in c.workers()}


def server_json(member: Member, names: dict[str, str]) -> dict[str, Any]:
    data = member.as_json()
    data["shards"] = {names.get(queue, queue): indexes for queue, indexes in data["shards"].items()}
    return data


@dataclass(frozen=True)
class Unserved:
    """A worker with due work and shards no live server holds."""

    view: WorkerView
    unserved: int
    lag: float


def unserved(c: Console, rows: list[tuple[WorkerView, Any]], members: list[Member]) -> list[Unserved]:
    """Workers whose work is due (lag > 0) while some of their shards have no live server (a paused
    queue's shards have none on purpose: it is marked paused instead)."""
    covered = ownership.coverage(members, {view.info.queue_name: view.info.shards_count for view, _ in rows})
    out = []
    for view, m in rows:
        gap = covered[view.info.queue_name].unserved
        if m.lag > 0 and gap > 0 and m.paused is None:
            out.append(Unserved(view, gap, m.lag))
    return out


def busy_servers(c: Console, view: WorkerView, jobs: list[Any]) -> tuple[list[ShardLease], dict[str, ShardLease]]:
    """The worker's shard leases, and for each busy job the lease of its shard (who runs it, since when)."""
    _, leases = ownership.shard_leases(c.client, view.keys, membership.live(c.client))
    by_job = {job.id: leases[codec.shard_of(job.id, view.keys.shards_count)] for job in jobs}
    return leases, by_job
