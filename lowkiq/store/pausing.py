"""Pausing a queue: servers stop taking its jobs within a heartbeat; producers keep enqueueing.

A pause is a field of one hash in the ``{lowkiq}`` slot, so it survives
restarts and every server reads it with the heartbeat it beats anyway (no
extra round trip): a server hands a paused queue's shards back after the
batch it is performing, and takes them again on the beat after a resume.
Pausing and its audit entry are one script.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import lua
from .audit import AUDIT_KEEP
from .keys import PauseKeys

PAUSE_KEYS = PauseKeys()
PAUSE, RESUME = "pause", "resume"


@dataclass(frozen=True)
class Pause:
    at: float  # unix time, from Redis
    who: str
    source: str  # "console", "api" or "cli"

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "who": self.who, "source": self.source}


def pause(client: Any, queue_name: str, *, worker: str, who: str, source: str) -> bool:
    """Pause ``queue_name`` (the queue of ``worker``); False when it was paused already."""
    return _set(client, PAUSE, queue_name, worker, who, source)


def resume(client: Any, queue_name: str, *, worker: str, who: str, source: str) -> bool:
    """Resume ``queue_name``; False when it was not paused."""
    return _set(client, RESUME, queue_name, worker, who, source)


def _set(client: Any, verb: str, queue_name: str, worker: str, who: str, source: str) -> bool:
    def entry(scope: str) -> str:
        return json.dumps({"who": who, "source": source, "action": verb, "worker": worker, "count": 0,
                           "ids": [], "ids_total": 0, "scope": scope}, ensure_ascii=False)

    already = "was paused already" if verb == PAUSE else "was not paused"
    done = f"queue {queue_name} {'paused' if verb == PAUSE else 'resumed'}"
    holder = json.dumps({"who": who, "source": source}, ensure_ascii=False)
    changed = lua.run(client, "pause", PAUSE_KEYS, (queue_name, verb, holder, entry(done), entry(already), AUDIT_KEEP))
    return bool(int(changed))


def paused(client: Any) -> dict[str, Pause]:
    """Every paused queue, by queue name."""
    return parse_all(client.hgetall(PAUSE_KEYS.paused_hash))


def parse_all(raw: Mapping[Any, Any] | list[Any]) -> dict[str, Pause]:
    """HGETALL of the paused hash (a dict, or a flat RESP2 list) as Pauses by queue name.

    A field that cannot be read still pauses its queue (servers read only the names): it shows as
    paused by nobody known.
    """
    if isinstance(raw, list):
        raw = dict(zip(raw[0::2], raw[1::2]))
    return {_text(name): parse(_text(value)) for name, value in raw.items()}


def parse(value: str) -> Pause:
    stamp, _, body = value.partition(" ")
    try:
        data = json.loads(body)
        return Pause(int(stamp) / 1000, str(data.get("who", "")), str(data.get("source", "")))
    except (ValueError, TypeError, AttributeError):
        return Pause(0.0, "", "")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
