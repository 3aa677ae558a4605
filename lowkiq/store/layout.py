"""Every producer and server agrees on how many shards each queue is split into.

The shard of an id is ``crc32(id) % shards_count``: two processes with different
counts put one id in two shards, where it can run twice at once and its versions
out of order. The first process to use a queue records its count in Redis; a
process that disagrees is refused (``LayoutMismatch``) before it writes a job or
serves a shard. ``change`` records a new count on purpose, once the queue is empty
and no server runs it; it also raises the fencing token of every new shard above
the highest one the old shards gave, so an id's token never goes down when the
id moves shard (see acquire.lua).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import LayoutChangeRefused as LayoutChangeRefused
from ..errors import LayoutMismatch
from . import lua, membership
from .keys import LayoutKeys, QueueKeys

if TYPE_CHECKING:
    from ..spec import WorkerSpec

LAYOUT_KEYS = LayoutKeys()


def claim(client: Any, workers: Iterable[type[WorkerSpec]]) -> None:
    """Record the layout of each worker's queue, or raise ``LayoutMismatch`` (nothing recorded then)."""
    by_queue: dict[str, type[WorkerSpec]] = {}
    args: list[Any] = []
    for worker in workers:
        same_queue = by_queue.setdefault(worker.queue_name, worker)
        if same_queue.shards_count != worker.shards_count:
            raise LayoutMismatch(worker.__name__, worker.queue_name, worker.shards_count, same_queue.shards_count)
        args += [worker.queue_name, worker.shards_count]
    if not args:
        return
    reply = lua.run(client, "layout", LAYOUT_KEYS, args)
    if reply:
        queue_name, recorded = (part.decode() if isinstance(part, bytes) else part for part in reply)
        worker = by_queue[queue_name]
        raise LayoutMismatch(worker.__name__, queue_name, worker.shards_count, int(recorded))


def recorded(client: Any, queue_name: str) -> int | None:
    """The shards_count recorded for a queue, None before any process used it."""
    [raw] = client.pipeline_commands([(LAYOUT_KEYS.layouts_hash, ("HGET", LAYOUT_KEYS.layouts_hash, queue_name))])
    return None if raw is None else int(raw)


def jobs_held(client: Any, keys: QueueKeys) -> int:
    """Jobs queued, running or dead in every shard of ``keys``: one round trip."""
    commands = []
    for shard in keys.shards():
        commands += [
            (shard.ids_by_perform_in_zset, ("ZCARD", shard.ids_by_perform_in_zset)),
            (shard.processing_hash, ("HLEN", shard.processing_hash)),
            (shard.morgue_ids_lex_zset, ("ZCARD", shard.morgue_ids_lex_zset)),
        ]
    return sum(int(n) for n in client.pipeline_commands(commands))


def change(client: Any, worker: type[WorkerSpec]) -> int | None:
    """Record ``worker.shards_count`` as its queue's layout; returns the count recorded before.

    Refused while a live server serves the queue or its old shards hold any job
    (they would be left in shards no process reads, or hashed to other shards).
    """
    queue_name, wanted = worker.queue_name, worker.shards_count
    before = recorded(client, queue_name)
    if before == wanted:
        return before
    serving = [m for m in membership.live(client) if any(name == queue_name for name, _ in m.queues)]
    if serving:
        names = ", ".join(f"{m.host} pid {m.pid}" for m in serving)
        raise LayoutChangeRefused(f"queue {queue_name!r} is served by {len(serving)} live server(s) ({names}); "
                                  f"stop them first")
    if before is not None:
        held = jobs_held(client, QueueKeys(queue_name, before))
        if held:
            raise LayoutChangeRefused(
                f"queue {queue_name!r} still holds {held:,} jobs (queued, running or dead) in its {before} shards; "
                f"stop its producers, let the servers drain it and empty its morgue, then change the layout")
    if before is not None:
        raise_fences(client, QueueKeys(queue_name, before), QueueKeys(queue_name, wanted))
    client.pipeline_commands([(LAYOUT_KEYS.layouts_hash, ("HSET", LAYOUT_KEYS.layouts_hash, queue_name, wanted))])
    return before


def highest_token(client: Any, keys: QueueKeys) -> tuple[int, int]:
    """The highest (cfg_epoch, fence) stored in the leases of ``keys``' shards, each part on its own: one round trip."""
    replies = client.pipeline_commands([(shard.lease_hash, ("HMGET", shard.lease_hash, "cfg_epoch", "fence"))
                                        for shard in keys.shards()])
    return (max((int(cfg or 0) for cfg, _ in replies), default=0),
            max((int(fence or 0) for _, fence in replies), default=0))


def raise_fences(client: Any, old: QueueKeys, new: QueueKeys) -> None:
    """Make every grant of ``new``'s shards carry a higher token than any grant ``old``'s shards gave.

    An id may move to a shard whose own token is lower (its last grant older, or stamped
    by a clock that has stepped back since): each new shard's stored token is raised to
    the old layout's highest, one script per shard, in one round trip.
    """
    cfg_epoch, fence = highest_token(client, old)
    if (cfg_epoch, fence) == (0, 0):
        return  # no shard was ever leased: no token to stay above
    lua.run_many(client, [("fence_floor", shard, (cfg_epoch, fence)) for shard in new.shards()])
