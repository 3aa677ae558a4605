"""Hot ids: which ids of a queue got the most versions enqueued, the most retries and the most perform time over
a recent window, counted from each shard's history stream (``ShardKeys.events_stream``, id_history.py), and
each shard's oldest due id.

The read is bounded per request: each shard's stream is walked from its newest entry back to the window's start,
at most ``per_shard`` entries (pages of id_history.PAGE), so a busy shard may be read over less than the window,
which the answer says (``Walk.reaches_back_to`` and ``Walk.whole``). The counts are exact over what was read:

- versions: the versions each push brought (``enq`` entries), merged or new;
- retries: the failures of each id (``fail`` entries: each outcome is one failed try);
- perform time: from the take of a batch to its acknowledgement or failure (``run`` and ``fail`` entries of the
  same holder), counted in full for every id of the batch, since a batch is performed as one call.

Example::

    found = hot_ids.read(transport, keys, since=time.time() - 3600, per_shard=10_000)
    found.by_versions[0].id
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..transport import Transport
from . import codec
from .id_history import PAGE, _at, _entries, _ids, _list
from .keys import QueueKeys

# Ids named per measure at most.
TOP = 10


@dataclass(frozen=True)
class HotId:
    id: str
    shard: int
    versions: int
    retries: int
    perform_seconds: float


@dataclass(frozen=True)
class Walk:
    """What was read of one shard's stream: ``examined`` entries, back to ``reaches_back_to`` (None: none read);
    ``whole``: all of the window, or all the stream keeps (else the per-shard budget stopped the walk)."""

    shard: int
    examined: int
    reaches_back_to: float | None
    whole: bool


@dataclass(frozen=True)
class ShardHead:
    """A shard's oldest due id and how long it has been due (None when nothing is queued in it)."""

    shard: int
    oldest_id: str | None
    perform_in: float | None
    lag: float
    queued: int


@dataclass
class Hot:
    since: float
    by_versions: list[HotId] = field(default_factory=list)
    by_retries: list[HotId] = field(default_factory=list)
    by_perform_time: list[HotId] = field(default_factory=list)
    walks: list[Walk] = field(default_factory=list)
    heads: list[ShardHead] = field(default_factory=list)
    ids_seen: int = 0

    @property
    def examined(self) -> int:
        return sum(w.examined for w in self.walks)

    @property
    def whole(self) -> bool:
        return all(w.whole for w in self.walks)


@dataclass
class _Tally:
    versions: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    shard_of: dict[str, int] = field(default_factory=dict)


def read(client: Transport, keys: QueueKeys, *, since: float, now: float, per_shard: int, top: int = TOP) -> Hot:
    """The hottest ids of the queue since ``since`` (unix seconds), each shard's stream read back to then, at most
    ``per_shard`` entries each; and each shard's oldest due id as of ``now``."""
    tally = _Tally()
    walks = []
    start = f"{int(since * 1000)}-0"
    first = min(PAGE, per_shard)
    # Every shard's newest page in one round trip; only shards with more in the window are read further.
    streams = [keys.shard(shard).events_stream for shard in range(keys.shards_count)]
    pages = client.pipeline_commands([(key, ("XREVRANGE", key, "+", start, "COUNT", first)) for key in streams])
    for shard, page in enumerate(pages):
        entries, walk = _walk(client, streams[shard], shard, start, per_shard, _entries(page), first)
        _count(tally, shard, reversed(entries))
        walks.append(walk)

    def best(counter: dict[str, Any]) -> list[HotId]:
        chosen = heapq.nlargest(top, counter.items(), key=lambda pair: (pair[1], pair[0]))
        return [_hot(tally, job_id) for job_id, amount in chosen if amount > 0]

    return Hot(since, best(tally.versions), best(tally.retries), best(tally.seconds), walks,
               heads(client, keys, now), len(tally.shard_of))


def heads(client: Transport, keys: QueueKeys, now: float) -> list[ShardHead]:
    """Each shard's oldest due id (the lowest perform_in) and its queued ids: one round trip."""
    commands: list[tuple[str, tuple[Any, ...]]] = []
    for shard in keys.shards():
        commands.append((shard.ids_by_perform_in_zset, ("ZRANGE", shard.ids_by_perform_in_zset, 0, 0, "WITHSCORES")))
        commands.append((shard.ids_by_perform_in_zset, ("ZCARD", shard.ids_by_perform_in_zset)))
    replies = client.pipeline_commands(commands)
    out = []
    for index in range(keys.shards_count):
        head, queued = replies[2 * index], int(replies[2 * index + 1])
        pairs = list(zip(head[0::2], head[1::2])) if head and not isinstance(head[0], (list, tuple)) else head
        if pairs:
            member, score = pairs[0]
            perform_in = codec.seconds(score)
            out.append(ShardHead(index, codec.text(member), perform_in, max(0.0, now - perform_in), queued))
        else:
            out.append(ShardHead(index, None, None, 0.0, queued))
    return out


def _walk(client: Transport, key: str, shard: int, start: str, per_shard: int,
          first: list[tuple[str, str, bytes]], asked: int) -> tuple[list[tuple[str, str, bytes]], Walk]:
    """The shard's entries from the newest back to ``start``, ``per_shard`` at most (newest first), going on
    from its first page ``first`` (``asked`` entries were asked for)."""
    out = list(first)
    got = len(first)
    while got == asked:  # a full page: the window may hold more
        asked = min(PAGE, per_shard - len(out))
        if asked <= 0:
            return out, Walk(shard, len(out), _at(out[-1][0]) if out else None, False)
        page = _entries(client.pipeline_commands([(key, ("XREVRANGE", key, "(" + out[-1][0], start, "COUNT",
                                                         asked))])[0])
        out += page
        got = len(page)
    return out, Walk(shard, len(out), _at(out[-1][0]) if out else None, True)


def _count(tally: _Tally, shard: int, entries: Iterable[tuple[str, str, bytes]]) -> None:
    """Counts entries, oldest first: a take is matched with its holder's next acknowledgement or failure."""
    taken_at: dict[tuple[Any, Any], tuple[float, list[str]]] = {}  # (server, thread) -> its batch in hand
    for entry_id, kind, detail in entries:
        at = _at(entry_id)
        d = msgpack.unpackb(detail, raw=True)
        if kind == "enq":
            for item in _list(d[0]):
                job_id = codec.text(item[0])
                tally.versions[job_id] += int(item[1])
                tally.shard_of[job_id] = shard
            continue
        if kind == "op" or len(d) < 4:
            continue
        holder, rest = (d[0], d[2]), d[3:]
        if kind == "run":
            _finish(tally, shard, taken_at.pop(holder, None), at)
            taken = _ids(rest[1])
            if taken:
                taken_at[holder] = (at, taken)
        elif kind == "fail":
            _finish(tally, shard, taken_at.pop(holder, None), at)
            for outcome in _list(rest[2]):
                job_id = codec.text(outcome[0])
                tally.retries[job_id] += 1
                tally.shard_of[job_id] = shard
        elif kind in ("rel", "back", "over"):
            taken_at.pop(holder, None)


def _finish(tally: _Tally, shard: int, batch: tuple[float, list[str]] | None, at: float) -> None:
    if batch is None:
        return
    started, ids = batch
    for job_id in ids:
        tally.seconds[job_id] = tally.seconds.get(job_id, 0.0) + (at - started)
        tally.shard_of[job_id] = shard


def _hot(tally: _Tally, job_id: str) -> HotId:
    return HotId(job_id, tally.shard_of.get(job_id, 0), tally.versions[job_id], tally.retries[job_id],
                 round(tally.seconds.get(job_id, 0.0), 3))
