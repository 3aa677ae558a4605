"""Depth and lag per group (docs/fairness.md, "Depth and lag per group"), for the stats API, the worker
page and Prometheus: a worker's biggest groups, the rest summed as ``(other)``.

Each shard keeps ``group_lengths`` (group -> its queued ids), moved by the same scripts that move ids in
and out of a group, so the counts are exact. A read is bounded per shard whatever the number of groups:

1. with the worker's other metrics (same round trip): each shard's ``TOP_GROUPS`` biggest groups
   (``ZREVRANGE``) and its grouped ids in all (``ZCARD`` of ``grouped_ids_by_perform_in``);
2. only when a shard holds groups, one more round trip for every worker: per such shard, the exact count
   of each of the ``CANDIDATES`` groups the shards listed biggest (one ``ZMSCORE``), and the oldest id of
   each of them and of the shard's own listed groups (one ``ZRANGEBYLEX … LIMIT 0 1`` of
   ``grouped_ids_lex`` each: at most ``CANDIDATES + TOP_GROUPS``).

The groups shown are the biggest candidates, with exact lengths; a group could be missed only if it is
outside the top of every shard yet among the biggest overall.

A group's lag is read from ``grouped_ids_lex``, whose first member per group holds the group's oldest
perform_in: the ``groups`` zset cannot serve, its score is max(oldest perform_in, last turn) and may be
stale-low. ``(other)`` has every other grouped id as its length, exactly; its lag is the largest among the
other groups the read looked at (each shard's biggest), so a small group outside every shard's top may
lag more: the worker's own lag covers every id.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..transport import Transport
from .keys import ShardKeys

TOP_GROUPS = 20
# Groups counted exactly (in every shard that holds groups) to choose the TOP_GROUPS shown.
CANDIDATES = 2 * TOP_GROUPS
OTHER = "(other)"
# Commands per shard in the first round trip (see shard_commands).
COMMANDS_PER_SHARD = 2


@dataclass(frozen=True, slots=True)
class GroupMetrics:
    """One group of a worker: its queued ids in every shard and how long its oldest due id has waited."""

    name: str
    length: int
    lag: float  # seconds; 0 when none of its ids is due


def shard_commands(shard: ShardKeys) -> list[tuple[Any, ...]]:
    """The first round trip's reads of one shard (cheap on a shard without groups: both keys are absent)."""
    return [("ZREVRANGE", shard.group_lengths_zset, 0, TOP_GROUPS - 1, "WITHSCORES"),
            ("ZCARD", shard.grouped_ids_by_perform_in_zset)]


@dataclass(frozen=True, slots=True)
class ShardGroups:
    """One shard's reply to ``shard_commands``."""

    keys: ShardKeys
    biggest: tuple[tuple[str, int], ...]
    grouped: int


def parse_shard(keys: ShardKeys, replies: Sequence[Any]) -> ShardGroups:
    return ShardGroups(keys, tuple((_text(member), int(float(score))) for member, score in withscores_pairs(replies[0])),
                       int(replies[1]))


def read(transport: Transport, workers: Sequence[Sequence[ShardGroups]], now: float) -> list[tuple[GroupMetrics, ...]]:
    """Each worker's groups from its shards' first replies: the ``TOP_GROUPS`` biggest by length (then name), and
    ``(other)`` when any grouped id is left; empty for a worker without grouped ids. One round trip for every
    worker, none when no shard holds groups."""
    plans = [_Plan.of(shards) for shards in workers]
    commands = [command for plan in plans if plan for command in plan.commands]
    replies = transport.pipeline_commands(commands) if commands else []
    out: list[tuple[GroupMetrics, ...]] = []
    position = 0
    for plan in plans:
        if plan is None:
            out.append(())
            continue
        out.append(plan.finish(replies[position : position + len(plan.commands)], now))
        position += len(plan.commands)
    return out


@dataclass(frozen=True, slots=True)
class _Plan:
    """The second round trip's reads of one worker, and how to read their replies."""

    shards: tuple[ShardGroups, ...]  # those holding groups
    candidates: tuple[str, ...]  # counted exactly in every shard; the biggest of them are shown
    heads: tuple[tuple[str, ...], ...]  # per shard, the groups whose oldest id is read
    commands: tuple[tuple[str, tuple[Any, ...]], ...]

    @classmethod
    def of(cls, shards: Sequence[ShardGroups]) -> _Plan | None:
        holding = tuple(s for s in shards if s.biggest)
        if not holding:
            return None
        listed: Counter[str] = Counter()
        for s in holding:
            listed.update(dict(s.biggest))
        # The listed lengths count a group short where it is outside a shard's top: take twice as many
        # candidates as are shown, count them exactly in every shard (one ZMSCORE) and show the biggest.
        ranked = sorted(listed.items(), key=lambda item: (-item[1], item[0]))
        candidates = tuple(name for name, _ in ranked[:CANDIDATES])
        commands: list[tuple[str, tuple[Any, ...]]] = []
        heads = []
        for s in holding:
            key = s.keys.group_lengths_zset
            commands.append((key, ("ZMSCORE", key, *candidates)))
            names = tuple(dict.fromkeys([*candidates, *(name for name, _ in s.biggest)]))
            heads.append(names)
            commands += [(key, _head_command(s.keys, name)) for name in names]
        return cls(holding, candidates, tuple(heads), tuple(commands))

    def finish(self, replies: Sequence[Any], now: float) -> tuple[GroupMetrics, ...]:
        lengths: Counter[str] = Counter()
        oldest: dict[str, float] = {}
        position = 0
        for names in self.heads:
            for name, score in zip(self.candidates, replies[position], strict=True):
                lengths[name] += int(float(score)) if score is not None else 0
            for name, reply in zip(names, replies[position + 1 : position + 1 + len(names)], strict=True):
                if reply:
                    at = _perform_in(name, reply[0])
                    oldest[name] = min(at, oldest.get(name, at))
            position += 1 + len(names)

        def lag(at: float | None) -> float:
            return 0.0 if at is None else max(0.0, now - at)

        biggest = sorted((name for name in self.candidates if lengths[name]), key=lambda n: (-lengths[n], n))
        shown = set(biggest[:TOP_GROUPS])
        out = [GroupMetrics(name, lengths[name], lag(oldest.get(name))) for name in biggest[:TOP_GROUPS]]
        rest = sum(s.grouped for s in self.shards) - sum(g.length for g in out)
        if rest > 0:
            others = [at for name, at in oldest.items() if name not in shown]
            out.append(GroupMetrics(OTHER, rest, lag(min(others, default=None))))
        return tuple(out)


def _prefix(group: str) -> bytes:
    """The head of a group's members in ``grouped_ids_lex``: its length in 2 bytes, then the group (_groups.lua)."""
    raw = group.encode()
    return struct.pack(">H", len(raw)) + raw


def _head_command(keys: ShardKeys, group: str) -> tuple[Any, ...]:
    prefix = _prefix(group)
    return ("ZRANGEBYLEX", keys.grouped_ids_lex_zset, b"[" + prefix, b"(" + prefix + b"\xff\xff", "LIMIT", 0, 1)


def _perform_in(group: str, member: bytes) -> float:
    """The perform_in a ``grouped_ids_lex`` member carries: 8 bytes after the prefix, sortable as _groups.lua's
    ``sortable`` writes them (a positive's sign bit set, a negative's every bit flipped)."""
    start = len(_prefix(group))
    raw = member[start : start + 8]
    if raw[0] >= 128:
        raw = bytes([raw[0] - 128]) + raw[1:]
    else:
        raw = bytes(255 - b for b in raw)
    value: float = struct.unpack(">d", raw)[0]
    return value


def withscores_pairs(reply: Any) -> list[tuple[Any, Any]]:
    """WITHSCORES as pairs: a flat list (RESP2) or a list of pairs (RESP3)."""
    if not reply:
        return []
    if isinstance(reply[0], (list, tuple)):
        return [(pair[0], pair[1]) for pair in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
