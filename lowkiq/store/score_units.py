"""Layout 3: time scores in Redis become integer microseconds, shard by shard, in place.

Redis keeps a small sorted set as a listpack, where an integer score is stored and compared
cheaper than a float's text (docs/redis.md, "Upgrading"). Every script and reader of this
version understands both units (below ``codec.US_AT`` a score is seconds), so the change needs
no stop: once every live server is of this version (each says so in its heartbeat), the keeper
migrates the shards it holds, a bounded chunk per call (``scores_migrate.lua``): the first call
switches the shard's writers to microseconds, the following ones convert what is left in
seconds, and the last records layout 3. A producer of an older version may still write seconds
into a migrated shard; they are read right and converted on the next pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import lua, membership
from .keys import ShardKeys

# What a server of this version says in its heartbeat: it reads microsecond scores.
CAPABILITY = membership.SCORES
# Scores one call converts at most, in the queue and again in the morgue: bounds the script's run time.
CHUNK = 500


def cluster_reads_us(members: Iterable[Any]) -> bool:
    """Whether every live server reads microsecond scores (and one at least is alive)."""
    members = list(members)
    return bool(members) and all(getattr(m, "scores", "") == CAPABILITY for m in members)


def migrate_call(keys: ShardKeys, chunk: int | None = None) -> lua.Call:
    return ("scores_migrate", keys, (chunk or CHUNK,))


@dataclass(frozen=True)
class Step:
    """What one migration call did in a shard: scores converted in the queue and the morgue, and whether
    none is left in seconds (layout 3 recorded)."""

    queued: int
    dead: int
    done: bool


def step_of(reply: Any) -> Step:
    queued, dead, done = reply
    return Step(int(queued), int(dead), bool(int(done)))


def layout_of(client: Any, keys: ShardKeys) -> tuple[int, bool]:
    """A shard's layout version (1 when none was recorded; 2 once a server of a version with retried ids' own
    index acquired it, acquire.lua; 3 once migrated) and whether its writers write microseconds."""
    [(layout, scores)] = client.pipeline_commands([(keys.lease_hash, ("HMGET", keys.lease_hash, "layout", "scores"))])
    return int(layout or 1), (scores == b"us" or scores == "us")
