"""Reads of the tag index (docs/tags.md): one tag's ids, shard by shard, by id in each shard.

Each shard indexes its tagged ids in its own slot (``ShardKeys.tagged_ids_lex_zset``), so a page
costs the tag's ids it reads, not the queue's size: a ZRANGEBYLEX and a few lookups per id found.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from ..jobs import tag_problem
from ..transport import Transport
from . import codec, lua
from .keys import QueueKeys

# Shards asked at once (one pipelined round trip): a tag with few ids per shard fills a page in few trips.
SHARDS_PER_TRIP = 16


@dataclass(frozen=True)
class Tagged:
    """A tagged id: all its tags, and where its copies are (a job may be queued and dead at once)."""

    id: str
    tags: tuple[str, ...]
    queued: bool
    busy: bool
    dead: bool

    def as_json(self) -> dict[str, object]:
        return {"id": self.id, "tags": list(self.tags), "queued": self.queued, "busy": self.busy, "dead": self.dead}


@dataclass(frozen=True)
class TaggedPage:
    """A page of one tag's ids; ``next`` is the cursor of the following page, None after the last."""

    jobs: list[Tagged]
    next: str | None


def check_tag(tag: str) -> str:
    """``tag`` if it may be a tag, else ValueError saying why (what an enqueue would refuse)."""
    problem = tag_problem(tag)
    if problem:
        raise ValueError(f"tag {problem[1]}")
    return tag


def cursor(shard: int, after: str) -> str:
    return f"{shard}:{after}"


def parse_cursor(token: str, shards_count: int) -> tuple[int, str]:
    """(shard, id to start after) of a page's ``next``; ValueError for anything else."""
    shard, sep, after = token.partition(":")
    if not sep or not shard.isdigit() or not 0 <= int(shard) < shards_count:
        raise ValueError(f"not a cursor of this tag's pages: {token[:100]!r}")
    return int(shard), after


def _tags(raw: bytes) -> tuple[str, ...]:
    return tuple(codec.text(tag) for tag in msgpack.unpackb(raw, raw=True)) if raw else ()


class Tags:
    def __init__(self, client: Transport, keys: QueueKeys) -> None:
        self.client = client
        self.keys = keys

    def of(self, job_id: str) -> tuple[str, ...]:
        """The tags of ``job_id`` (any copy of it: queued, in processing, dead); () when it has none."""
        shard = self.keys.shard(codec.shard_of(job_id, self.keys.shards_count))
        raw = self.client.pipeline_commands([(shard.tags_of_hash, ("HGET", shard.tags_of_hash, job_id))])[0]
        return _tags(raw) if isinstance(raw, bytes) else ()

    def page(self, tag: str, *, limit: int, after: str | None = None) -> TaggedPage:
        """Up to ``limit`` ids tagged ``tag``, from ``after`` (a previous page's ``next``) on. Each id comes
        once across the pages; a page may come short of ``limit`` with more to follow."""
        check_tag(tag)
        shard, last = parse_cursor(after, self.keys.shards_count) if after else (0, "")
        found: list[Tagged] = []
        while shard < self.keys.shards_count:
            trip = range(shard, min(shard + SHARDS_PER_TRIP, self.keys.shards_count))
            want = limit - len(found)
            replies = lua.run_many(self.client, [
                ("tagged", self.keys.shard(s), (tag, last if s == shard else "", want)) for s in trip])
            for s, reply in zip(trip, replies):
                if isinstance(reply, BaseException):
                    raise reply
                rows = [Tagged(codec.text(reply[i]), _tags(reply[i + 1]), b"q" in reply[i + 2],
                               b"p" in reply[i + 2], b"m" in reply[i + 2]) for i in range(0, len(reply), 3)]
                room = limit - len(found)
                found.extend(rows[:room])
                if len(rows) >= room:
                    # the page is full here: the next one goes on after its last id (maybe to find none more)
                    return TaggedPage(found, cursor(s, found[-1].id) if found else cursor(s, last))
            shard, last = trip[-1] + 1, ""
        return TaggedPage(found, None)
