"""The audit log: every operator action (console, API, CLI) with who, what, on which jobs, and how many.

Entries live in one capped Redis list (``AUDIT_KEEP`` newest), each written by one
script that stamps it with Redis server time, so entries from many hosts sort by
one clock. Reading never fails on a malformed entry: it comes back with what
could be read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .queue import lua
from .queue.keys import AuditKeys

AUDIT_KEYS = AuditKeys()
# Enough for weeks of incidents; each entry is a few hundred bytes.
AUDIT_KEEP = 10_000
# Ids named in an entry at most: a bulk action on 50,000 ids records its count, not every id.
IDS_KEPT = 100


@dataclass(frozen=True)
class Entry:
    at: float  # unix time, from Redis
    who: str
    source: str  # "console", "api" or "cli"
    action: str  # e.g. "morgue/requeue"
    worker: str
    count: int  # jobs the action touched
    ids: list[str] = field(default_factory=list)
    ids_total: int = 0
    scope: str = ""  # what was acted on when not ids: "all", or a filter

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "who": self.who, "source": self.source, "action": self.action, "worker": self.worker,
                "count": self.count, "ids": self.ids, "ids_total": self.ids_total, "scope": self.scope}


def record(client: Any, *, who: str, source: str, action: str, worker: str, count: int,
           ids: list[str] | None = None, scope: str = "") -> None:
    ids = list(ids or [])
    entry = {"who": who, "source": source, "action": action, "worker": worker, "count": count,
             "ids": ids[:IDS_KEPT], "ids_total": len(ids), "scope": scope}
    lua.run(client, "audit", AUDIT_KEYS, (json.dumps(entry, ensure_ascii=False), AUDIT_KEEP))


def read(client: Any, limit: int = 100) -> list[Entry]:
    """The newest ``limit`` entries, newest first."""
    raw = client.lrange(AUDIT_KEYS.audit_list, 0, max(0, limit - 1))
    return [_parse(item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)) for item in raw]


def _parse(text: str) -> Entry:
    stamp, _, body = text.partition(" ")
    try:
        at = int(stamp) / 1000
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return Entry(at, str(data.get("who", "")), str(data.get("source", "")), str(data.get("action", "")),
                     str(data.get("worker", "")), int(data.get("count", 0)), [str(i) for i in data.get("ids", [])],
                     int(data.get("ids_total", 0)), str(data.get("scope", "")))
    except (ValueError, TypeError):
        return Entry(0.0, "", "", "unreadable entry", "", 0, scope=text[:200])
