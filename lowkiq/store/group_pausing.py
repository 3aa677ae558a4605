"""Pausing one group of a worker (docs/fairness.md, "Pausing a group"): its ids stay queued, in order, while
every other group keeps flowing.

A group's ids live in every shard of its worker, and a Redis Cluster puts each shard in its own slot: the pause
is a field of each shard's ``paused_groups`` hash, written by one script per shard (``group_pause.lua``, one
slot each), all sent in one round trip. The take never reads it: a paused group is out of the shard's rotation
(``groups``), so passing it over costs nothing. A shard the round trip missed (an error) says so; running the
action again finishes it, as each shard's step is idempotent.

The console's listing of a worker's groups (``read_groups``) reads each shard's group lengths, paused groups and
busy ids in one round trip, then each listed group's oldest id and the busy ids' groups in a second one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..jobs import normalize_group
from ..transport import Transport
from . import lua
from .group_metrics import _head_command, _perform_in, withscores_pairs
from .keys import WAKE_CHANNEL, QueueKeys
from .pausing import PAUSE, RESUME, Pause, parse

# Groups listed per shard at most, the biggest first (paused ones always): a listing stays bounded however many
# tenants a worker serves.
LISTED_PER_SHARD = 200


def checked_group(group: Any) -> str:
    """``group`` if it may name a group, else TypeError/ValueError saying why (the default group has no name and
    cannot be paused: pause the worker instead)."""
    try:
        name = normalize_group(group, 0)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).removeprefix("job 0: ")) from None
    if name is None:
        raise ValueError("group must be a group's name: the default group cannot be paused alone")
    return name


def set_paused(client: Transport, keys: QueueKeys, group: str, verb: str, *, who: str, source: str) -> int:
    """Pause or resume ``group`` in every shard of the queue; returns in how many shards its state changed
    (0: it was paused, or not paused, already)."""
    if verb not in (PAUSE, RESUME):
        raise ValueError(f"verb must be {PAUSE!r} or {RESUME!r}, got {verb!r}")
    group = checked_group(group)
    holder = json.dumps({"who": who, "source": source}, ensure_ascii=False)
    calls: list[lua.Call] = [("group_pause", shard, (group, verb, holder, WAKE_CHANNEL, shard.wake_message))
                             for shard in keys.shards()]
    return sum(int(changed) for changed in lua.run_many(client, calls))


@dataclass(frozen=True)
class GroupRow:
    """One group of a worker: its queued ids, the ids performing now, how long its oldest due id has waited
    (seconds, 0 when none is due), and who paused it (None: it flows)."""

    name: str
    queued: int
    busy: int
    oldest_wait: float
    paused: Pause | None

    def as_json(self) -> dict[str, Any]:
        return {"group": self.name, "queued": self.queued, "busy": self.busy,
                "oldest_wait": round(self.oldest_wait, 3), "paused": self.paused.as_json() if self.paused else None}


def paused_groups(client: Transport, keys: QueueKeys) -> dict[str, Pause]:
    """The worker's paused groups (one read per shard, one round trip), the earliest pause of each."""
    replies = client.pipeline_commands([(s.paused_groups_hash, ("HGETALL", s.paused_groups_hash))
                                        for s in keys.shards()])
    out: dict[str, Pause] = {}
    for reply in replies:
        for name, value in _mapping(reply).items():
            pause = parse(_text(value))
            if name not in out or pause.at < out[name].at:
                out[name] = pause
    return out


def read_groups(client: Transport, keys: QueueKeys, now: float) -> list[GroupRow]:
    """The worker's groups, most queued first, paused ones among them: two round trips."""
    shards = keys.shards()
    first: list[tuple[str, tuple[Any, ...]]] = []
    for s in shards:
        first += [(s.group_lengths_zset, ("ZREVRANGE", s.group_lengths_zset, 0, LISTED_PER_SHARD - 1, "WITHSCORES")),
                  (s.paused_groups_hash, ("HGETALL", s.paused_groups_hash)),
                  (s.processing_hash, ("HKEYS", s.processing_hash))]
    replies = client.pipeline_commands(first)
    queued: dict[str, int] = {}
    paused: dict[str, Pause] = {}
    listed: list[list[str]] = []
    busy_ids: list[list[bytes]] = []
    for n in range(len(shards)):
        lengths, held, processing = replies[3 * n: 3 * n + 3]
        names = []
        for member, score in withscores_pairs(lengths):
            name = _text(member)
            queued[name] = queued.get(name, 0) + int(float(score))
            names.append(name)
        for member, value in _mapping(held).items():
            pause = parse(_text(value))
            if member not in paused or pause.at < paused[member].at:
                paused[member] = pause
            if member not in names:
                names.append(member)
        listed.append(names)
        busy_ids.append(list(processing or []))
    second: list[tuple[str, tuple[Any, ...]]] = []
    for s, names, ids in zip(shards, listed, busy_ids):
        second += [(s.grouped_ids_lex_zset, _head_command(s, name)) for name in names]
        if ids:
            second.append((s.group_of_hash, ("HMGET", s.group_of_hash, *ids)))
    replies = client.pipeline_commands(second) if second else []
    oldest: dict[str, float] = {}
    busy: dict[str, int] = {}
    position = 0
    for names, ids in zip(listed, busy_ids):
        for name, reply in zip(names, replies[position: position + len(names)]):
            if reply:
                at = _perform_in(name, reply[0])
                oldest[name] = min(at, oldest.get(name, at))
        position += len(names)
        if ids:
            for group in replies[position]:
                if group is not None:
                    busy[_text(group)] = busy.get(_text(group), 0) + 1
            position += 1
    rows = [GroupRow(name, queued.get(name, 0), busy.get(name, 0),
                     max(0.0, now - oldest[name]) if name in oldest else 0.0, paused.get(name))
            for name in set(queued) | set(paused) | set(busy)]
    return sorted(rows, key=lambda r: (-r.queued, r.name))




def _mapping(reply: Any) -> dict[str, Any]:
    """HGETALL as {field: value}: a dict (RESP3) or a flat list (RESP2)."""
    if not reply:
        return {}
    if isinstance(reply, dict):
        return {_text(k): v for k, v in reply.items()}
    return {_text(k): v for k, v in zip(reply[::2], reply[1::2], strict=True)}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
