"""The audit log: every operator action (console, API, CLI) with who, what, on which jobs, and how many.

Entries live in one Redis list, each written by one script that stamps it with Redis
server time, so entries from many hosts sort by one clock. Reading never fails on a
malformed entry: it comes back with what could be read.

The log is bounded in bytes, not only in entries, because what an entry holds comes from
operators and clients: every field is clipped, ids are named up to ``IDS_KEPT`` and
``IDS_BYTES`` and then only counted (``ids_total``), so an entry stays under
``ENTRY_BYTES``; the script keeps the ``AUDIT_KEEP`` newest entries and trims the oldest
while the list holds more than ``AUDIT_BYTES`` of Redis memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import lua
from .keys import AuditKeys

AUDIT_KEYS = AuditKeys()
# Enough for weeks of incidents; each entry is a few hundred bytes.
AUDIT_KEEP = 10_000
# The list's Redis memory at most (MEMORY USAGE): 10,000 entries of ids could otherwise be 160 MB.
AUDIT_BYTES = 16 * 1024 * 1024
# An entry's JSON at most; the script refuses a larger one (a writer that skipped ``record``).
ENTRY_BYTES = 16 * 1024 - 32  # the stamp in front ("<ms> ") fits in what is left
# Ids named in an entry at most, by number and by their JSON's bytes: a bulk action on 50,000
# ids, or on 100 ids of a kilobyte, records its count and the first ids that fit.
IDS_KEPT = 100
IDS_BYTES = 8 * 1024
# Characters kept of each field; the cut ones end with CUT. At most 6 bytes a character in JSON
# ("\u001b"), so everything but the ids stays under 6.5 KB.
CUT = "…"
FIELD_CHARS = {"who": 200, "source": 20, "action": 100, "worker": 200, "scope": 500}
ID_CHARS = 200


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
    """Append an entry, clipped to ``ENTRY_BYTES`` (see ``entry_json``), and trim the log.

    Example::

        audit.record(client, who="alice", source="cli", action="morgue/requeue", worker="OrdersWorker",
                     count=2, ids=["1", "2"])
    """
    text = entry_json(who=who, source=source, action=action, worker=worker, count=count, ids=ids, scope=scope)
    lua.run(client, "audit", AUDIT_KEYS, (text, AUDIT_KEEP, AUDIT_BYTES, ENTRY_BYTES))


def entry_json(*, who: str, source: str, action: str, worker: str, count: int,
               ids: list[str] | None = None, scope: str = "") -> str:
    """The entry as stored (without its time): every field clipped, the ids that fit, their total.

    At most ``ENTRY_BYTES`` of UTF-8 whatever it is given.
    """
    ids = list(ids or [])
    fields = {"who": who, "source": source, "action": action, "worker": worker, "scope": scope}
    entry: dict[str, Any] = {name: _clip(value, FIELD_CHARS[name]) for name, value in fields.items()}
    entry.update(count=int(count), ids=_ids_that_fit(ids), ids_total=len(ids))
    text = json.dumps(entry, ensure_ascii=False)
    while len(text.encode()) > ENTRY_BYTES and entry["ids"]:  # not reached with the limits above: a guard
        entry["ids"] = entry["ids"][: len(entry["ids"]) // 2]
        text = json.dumps(entry, ensure_ascii=False)
    return text


def with_note(scope: str, note: str) -> str:
    """``scope`` then ``note`` (": started"), the scope clipped so that the note is kept whole in the entry."""
    return _clip(scope, FIELD_CHARS["scope"] - len(note)) + note if note else scope


def _clip(value: object, chars: int) -> str:
    # A lone surrogate ("\ud800") cannot be UTF-8: written out as its escape, never an error.
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= chars else text[: chars - len(CUT)] + CUT


def _ids_that_fit(ids: list[str]) -> list[str]:
    kept: list[str] = []
    used = 2  # "[]"
    for job_id in ids[:IDS_KEPT]:
        clipped = _clip(job_id, ID_CHARS)
        size = len(json.dumps(clipped, ensure_ascii=False).encode()) + 2  # ", "
        if used + size > IDS_BYTES:
            break
        kept.append(clipped)
        used += size
    return kept


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
