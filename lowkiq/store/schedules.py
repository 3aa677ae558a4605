"""Recurring schedules kept in Redis: each tick's enqueue (exactly once), pausing, and the console's reads.

A schedule's state lives in the slot of the shard its jobs land in (``ScheduleShardKeys``):
``schedule_tick`` pushes a tick's job and moves the schedule's high-water mark in one script,
only for ticks above the mark, so any number of servers may send the same tick. Its
pause sits beside the mark: a paused schedule's tick is refused in that same step.

The registry (one hash in the ``{lowkiq}`` slot) describes every schedule a server runs, so
a console that does not import the app can list them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ..spec import CATCH_UP, Rule, ScheduleSpec
from . import codec, lua
from .keys import (
    WAKE_CHANNEL,
    ScheduleShardKeys,
    ScheduleStateKeys,
    schedule_registry_hash,
    validate_queue_name,
)

PAUSE, RESUME = "pause", "resume"
# Schedules the registry holds and a console reads at most: each costs one read per page.
MAX_SCHEDULES = 500
MAX_ENTRY_BYTES = 8192


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as the console knows it: from the app's configuration or from the registry."""

    name: str
    worker: str
    queue_name: str
    shards_count: int
    cron: str | None
    every: int | None
    timezone: str
    id: str
    catch_up: str

    @property
    def rule(self) -> Rule:
        return Rule(self.cron, self.every, self.timezone)

    @property
    def keys(self) -> ScheduleShardKeys:
        return ScheduleShardKeys(self.queue_name, codec.shard_of(self.id, self.shards_count))


@dataclass(frozen=True)
class TickOutcome:
    """What ``schedule_tick`` did: outcome "enqueued", "skipped", "paused", "state" or "early"."""

    outcome: str
    mark: float | None  # the latest tick dealt with (enqueued, or skipped by catch_up)
    last: float | None  # the latest tick enqueued
    ticks: tuple[float, ...] = ()  # enqueued by this call
    redis_now: float | None = None  # "early": Redis's time, before every tick sent


def info_of(schedule: ScheduleSpec) -> ScheduleInfo:
    w = schedule.worker
    return ScheduleInfo(schedule.name, w.__name__, w.queue_name, w.shards_count, schedule.cron,
                        None if schedule.every is None else int(schedule.every), schedule.timezone,
                        schedule.job_id, schedule.catch_up)


def keys_of(schedule: ScheduleSpec) -> ScheduleShardKeys:
    return info_of(schedule).keys


def tick_call(schedule: ScheduleSpec, ticks: Sequence[float], missed_until: float,
              dump_payload: Callable[[Any], bytes | str]) -> lua.Call:
    """The script call that enqueues the jobs of ``ticks`` (oldest first) above the schedule's mark;
    with no ticks, it only reads the schedule's state."""
    keys = keys_of(schedule)
    meta = msgpack.packb([schedule.name, repr(float(missed_until)), schedule.catch_up], use_bin_type=False)
    if not ticks:
        return ("schedule_tick", keys, ("", meta))
    pack = msgpack.Packer(use_bin_type=False).pack
    flat: list[Any] = []
    for tick in ticks:
        payload = codec_bytes(dump_payload(schedule.payload_for(tick)))
        # As Queue.push packs a job: id, perform_in, the pair (payload, score), "score is a placeholder".
        flat.extend((schedule.job_id, repr(float(tick)), pack((payload, float(tick))), False))
    blob = msgpack.packb(flat, use_bin_type=False)
    hold = "1" if getattr(schedule.worker, "morgue_policy", "") == "whole_id" else ""
    limit = getattr(schedule.worker, "max_payloads_per_id", None) or 0
    overflow = getattr(schedule.worker, "payload_overflow", "drop_oldest")
    push_args = (blob, 0, limit, overflow, WAKE_CHANNEL, keys.shard_keys.wake_message, hold)
    return ("schedule_tick", keys, (*push_args, meta))


def codec_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def outcome_of(reply: Sequence[Any]) -> TickOutcome:
    def number(raw: Any) -> float | None:
        text = _text(raw)
        return float(text) if text else None

    outcome = _text(reply[0])
    if outcome == "early":
        return TickOutcome(outcome, number(reply[1]), number(reply[2]), (), number(reply[3]))
    return TickOutcome(outcome, number(reply[1]), number(reply[2]), tuple(float(_text(t)) for t in reply[3:]))


def set_paused(client: Any, info: ScheduleInfo, verb: str, *, who: str, source: str) -> bool:
    """Pause or resume a schedule; False when it already was so. Audited by the caller (console/operations)."""
    if verb not in (PAUSE, RESUME):
        raise ValueError(f"verb must be {PAUSE!r} or {RESUME!r}")
    keys = ScheduleStateKeys(info.keys.queue_name, info.keys.shard)
    holder = json.dumps({"who": who, "source": source}, ensure_ascii=False)
    return bool(int(lua.run(client, "schedule_pause", keys, (info.name, verb, holder))))


# -- the registry, for a console without the app's code ---------------------------------------


def register(client: Any, schedules: Iterable[ScheduleSpec]) -> None:
    """Record the schedules a server runs (one HSET in the {lowkiq} slot)."""
    mapping = {s.name: json.dumps(s.definition(), sort_keys=True) for s in schedules}
    if mapping:
        client.hset(schedule_registry_hash(), mapping=mapping)


def read_registry(client: Any) -> list[ScheduleInfo]:
    """The registered schedules, by name; entries that are not what ``register`` writes are skipped."""
    if int(client.hlen(schedule_registry_hash())) > MAX_SCHEDULES:
        names = sorted(_text(n) for n in client.hkeys(schedule_registry_hash()))[:MAX_SCHEDULES]
        raw = dict(zip(names, client.hmget(schedule_registry_hash(), names)))
    else:
        raw = {_text(k): v for k, v in client.hgetall(schedule_registry_hash()).items()}
    out = []
    for name, value in sorted(raw.items()):
        info = _parse(name, value)
        if info is not None:
            out.append(info)
    return out


def registered_payload(client: Any, name: str) -> dict[str, Any]:
    """The payload dict the registry holds for a schedule ({} when none can be read)."""
    raw = client.hget(schedule_registry_hash(), name)
    try:
        payload = json.loads(raw).get("payload") if raw is not None and len(raw) <= MAX_ENTRY_BYTES else None
    except (ValueError, TypeError, AttributeError):
        payload = None
    return dict(payload) if isinstance(payload, dict) else {}


def _parse(name: str, raw: Any) -> ScheduleInfo | None:
    if raw is None or len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        data = json.loads(raw)
        every = data.get("every")
        info = ScheduleInfo(
            name=validate_queue_name(name, "schedule name"), worker=validate_queue_name(str(data["worker"]), "worker"),
            queue_name=validate_queue_name(str(data["queue_name"])), shards_count=int(data["shards_count"]),
            cron=None if data.get("cron") is None else str(data["cron"]),
            every=None if every is None else int(every), timezone=str(data.get("timezone") or "UTC"),
            id=str(data.get("id") or name), catch_up=str(data.get("catch_up") or "last"))
        if info.shards_count < 1 or info.catch_up not in CATCH_UP or (info.cron is None) == (info.every is None):
            return None
        info.rule.next_after(0)  # a rule this process cannot evaluate (unknown zone, bad cron) is not listed
        return info
    except (ValueError, TypeError, KeyError, AttributeError, LookupError):
        return None


# -- what the console shows of each schedule ---------------------------------------------------


@dataclass(frozen=True)
class ScheduleState:
    mark: float | None
    last_at: float | None
    paused: bool
    paused_at: float | None
    paused_by: str
    # what became of the job of the last tick, as far as the queue tells: "queued", "retrying",
    # "performing", "in the morgue", "done" (none of those any more) or "" (never enqueued)
    outcome: str


def states(client: Any, infos: Sequence[ScheduleInfo]) -> list[ScheduleState]:
    """Each schedule's state, in one pipelined round trip of reads (five per schedule)."""
    if not infos:
        return []
    pipe = client.pipeline(transaction=False)
    for info in infos:
        keys = info.keys
        shard = keys.shard_keys
        n = info.name
        pipe.hmget(keys.schedules_hash, [f"tick:{n}", f"last:{n}", f"paused:{n}"])
        pipe.hexists(shard.processing_hash, info.id)
        pipe.zscore(shard.ids_by_perform_in_zset, info.id)
        pipe.zscore(shard.ids_by_retry_count_zset, info.id)
        pipe.hexists(shard.morgue_payloads_hash, info.id)
    replies = pipe.execute()
    out = []
    for i in range(len(infos)):
        (mark, last, paused), performing, queued, retries, dead = replies[5 * i: 5 * i + 5]
        paused_at, paused_by = None, ""
        if paused is not None:
            stamp, _, body = _text(paused).partition(" ")
            try:
                paused_at = int(stamp) / 1000
                paused_by = str(json.loads(body).get("who", ""))
            except (ValueError, TypeError, AttributeError):
                pass
        if last is None:
            outcome = ""
        elif performing:
            outcome = "performing"
        elif queued is not None:
            outcome = "retrying" if retries is not None else "queued"
        elif dead:
            outcome = "in the morgue"
        else:
            outcome = "done"
        out.append(ScheduleState(_float(mark), _float(last), paused is not None, paused_at, paused_by, outcome))
    return out


def _float(raw: Any) -> float | None:
    return None if raw is None else float(_text(raw))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
