"""Server processes alive now: each one beats a heartbeat into Redis and reads everyone's.

One script per beat (``member_beat``) refreshes this process, drops members
whose heartbeat expired and returns the live ones, so that every process
computes the shard assignment from the same list.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .keys import WAKE_CHANNEL, MemberKeys

MEMBER_KEYS = MemberKeys()
# What this version's heartbeat says of time scores: it reads integer microseconds (store/score_units.py).
SCORES = "us"
RUNNING, DRAINING = "running", "draining"


def new_member_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Member:
    """A live server process, as its last heartbeat described it."""

    id: str
    host: str
    pid: int
    threads: int
    version: str
    started_ms: int
    state: str
    queues: tuple[tuple[str, int], ...]
    hint: tuple[int, int] | None
    stable_name: str
    # queue name -> shard indexes it holds the lease of, as of its last beat
    shards: Mapping[str, tuple[int, ...]]
    expires_ms: int
    ttl_ms: int
    # the keeper's periodic duties whose last run failed: {"duty", "error", "since", "failures"} each
    failing: tuple[Mapping[str, Any], ...] = ()
    # a suspect batch its other threads wait for: {"worker", "shard", "ids", "thread", "since", "for_at_most"}
    waiting: Mapping[str, Any] | None = None
    # "us" when it reads time scores in integer microseconds (store/score_units.py); "" for an older version
    scores: str = ""

    @property
    def name(self) -> str:
        """The server's one name, on every page and in the API: its --name, else host:pid."""
        return self.stable_name or f"{self.host}:{self.pid}"

    @property
    def activity(self) -> str:
        """"stopping" (handing its shards over), "waiting" (its threads wait for a suspect batch) or "serving"."""
        if self.state == DRAINING:
            return "stopping"
        return "waiting" if self.waiting else "serving"

    @property
    def heartbeat_ms(self) -> int:
        return self.expires_ms - self.ttl_ms

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "threads": self.threads,
            "version": self.version,
            "name": self.stable_name,
            "server": self.name,
            "started_at": self.started_ms / 1000,
            "heartbeat_at": self.heartbeat_ms / 1000,
            "state": self.activity,
            "waiting": dict(self.waiting) if self.waiting else None,
            "shards": {queue: list(indexes) for queue, indexes in sorted(self.shards.items())},
            "failing_duties": [dict(f) for f in self.failing],
        }


def info(*, threads: int, version: str, state: str, started_ms: int, queues: Sequence[tuple[str, int]],
         hint: tuple[int, int] | None, stable_name: str, shards: Mapping[str, Sequence[int]], ttl_ms: int,
         failing: Sequence[Mapping[str, Any]] = (), waiting: Mapping[str, Any] | None = None) -> str:
    """This process's heartbeat record."""
    return json.dumps({
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "threads": threads,
        "version": version,
        "started_ms": started_ms,
        "state": state,
        "queues": [list(q) for q in queues],
        "hint": list(hint) if hint else None,
        "name": stable_name,
        "shards": {q: sorted(indexes) for q, indexes in shards.items() if indexes},
        "ttl_ms": ttl_ms,
        "scores": SCORES,
        **({"failing": list(failing)} if failing else {}),
        **({"waiting": dict(waiting)} if waiting else {}),
    }, separators=(",", ":"))


def parse(member_id: str, raw: bytes | str | None, expires_ms: float) -> Member | None:
    """A member from its record; None when the record is missing or malformed (it is then ignored)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        hint = data.get("hint")
        return Member(
            id=member_id,
            host=str(data["host"]),
            pid=int(data["pid"]),
            threads=int(data["threads"]),
            version=str(data.get("version", "")),
            started_ms=int(data["started_ms"]),
            state=str(data.get("state", RUNNING)),
            queues=tuple((str(q), int(n)) for q, n in data.get("queues", [])),
            hint=(int(hint[0]), int(hint[1])) if hint else None,
            stable_name=str(data.get("name") or ""),
            shards={str(q): tuple(int(i) for i in v) for q, v in dict(data.get("shards") or {}).items()},
            expires_ms=int(float(expires_ms)),
            ttl_ms=int(data.get("ttl_ms", 0)),
            failing=tuple(_failure(f) for f in data.get("failing") or ()),
            waiting=dict(data["waiting"]) if isinstance(data.get("waiting"), dict) else None,
            scores=str(data.get("scores") or ""),
        )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _failure(raw: Any) -> Mapping[str, Any]:
    return {"duty": str(raw["duty"]), "error": str(raw.get("error", "")), "since": float(raw.get("since", 0)),
            "failures": int(raw.get("failures", 1))}


# Published on WAKE_CHANNEL when a member comes, begins to leave or leaves: the others beat at once.
MEMBERS_MESSAGE = "members"


def beat_call(member_id: str, ttl_ms: int, record: str, *,
              announce: bool = False) -> tuple[str, MemberKeys, tuple[Any, ...]]:
    return ("member_beat", MEMBER_KEYS, (member_id, ttl_ms, record, WAKE_CHANNEL if announce else ""))


def leave_call(member_id: str) -> tuple[str, MemberKeys, tuple[Any, ...]]:
    return ("member_leave", MEMBER_KEYS, (member_id, WAKE_CHANNEL))


def members_of(reply: Sequence[Any]) -> tuple[int, list[Member]]:
    """(Redis time in ms, live members) from a ``member_beat`` reply."""
    now_ms, ids, details, expiries = reply[:4]
    out = []
    for raw_id, raw, expires in zip(ids, details, expiries):
        member_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        member = parse(member_id, raw, float(expires))
        if member is not None:
            out.append(member)
    return int(now_ms), out


def paused_of(reply: Sequence[Any]) -> frozenset[str]:
    """The paused queues' names from a ``member_beat`` reply."""
    return frozenset(n.decode() if isinstance(n, bytes) else str(n) for n in reply[4])


def live(client: Any) -> list[Member]:
    """The live members, for the console and the CLI (a read: it beats nothing)."""
    pipe = client.pipeline(transaction=False)
    for command in READ_COMMANDS:
        pipe.execute_command(*command)
    return from_replies(pipe.execute())


# What ``from_replies`` reads: Redis's clock, the heartbeats, the records.
READ_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("TIME",),
    ("ZRANGE", MEMBER_KEYS.members_zset, "0", "-1", "WITHSCORES"),
    ("HGETALL", MEMBER_KEYS.member_info_hash),
)


def from_replies(replies: Sequence[Any]) -> list[Member]:
    """The live members from the replies to READ_COMMANDS (raw RESP2 replies or redis-py's parsed ones)."""
    (seconds, micros), scored, infos = replies
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    if scored and not isinstance(scored[0], (list, tuple)):
        scored = list(zip(scored[0::2], scored[1::2]))
    if isinstance(infos, list):
        infos = dict(zip(infos[0::2], infos[1::2]))
    out = []
    for raw_id, expires in scored:
        if float(expires) < now_ms:
            continue
        member_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        member = parse(member_id, infos.get(raw_id), float(expires))
        if member is not None:
            out.append(member)
    return sorted(out, key=lambda m: (m.host, m.pid, m.id))
