"""Each id's history: what happened to it, when, where and by whom (docs/history.md).

Every script that moves ids of a shard writes one entry into the shard's event stream
(``ShardKeys.events_stream``; _history.lua): a push names the ids it brought
and how many versions each, a take and its ack name the holder (server, thread, fencing token)
and the ids taken and performed, a failure each id's retry count, outcome and error, an
operator's action who acted. The stream keeps the shard's newest ``history_length`` entries
(the holder of the lease also trims those older than ``history_max_age``), so an id's history
reaches back as far as its shard's retained entries: the busier the shard, the shorter the time.

An id's history is read by walking its shard's stream from the newest entry back, a page per
round trip, and keeping the entries that name it: the walk is bounded by what the stream
retains, and says how many entries it examined and whether it reached the oldest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack
import redis

from .. import stored_error
from ..transport import Transport, as_transport
from . import codec, lua
from .keys import QueueKeys, ShardKeys
from .leases import UNTAKE_AHEAD

# Entries per round trip of a walk: one XREVRANGE of this many costs Redis well under a millisecond.
PAGE = 500
# A walk stops after this many entries whatever the stream holds (it says so: ``complete`` is False).
MAX_EXAMINED = 200_000
# How often a server trims its shards' streams by age, in seconds.
TRIM_EVERY = 60.0

# Operators' verbs as the scripts write them, and the event each is in an id's history.
OPERATOR_EVENTS = {
    "requeue": "requeued",
    "morgue_delete": "deleted_from_morgue",
    "delete": "deleted",
    "perform_now": "performed_now",
    "kill": "killed",
    "delete_failed": "deleted",
}

TAKEN_AHEAD = "taken ahead with the others named, to be performed one at a time in this order (take-ahead)"

# Every kind of event, with what the console and the CLI say of it.
KINDS = {
    "enqueued": "enqueued",
    "merged": "merged into its queued job",
    "joined_dead": "joined its job in the morgue (morgue_policy whole_id)",
    "taken": "taken",
    "performed": "performed",
    "failed": "failed",
    "morgued": "moved to the morgue",
    "restored": "put back into the queue",
    "requeued": "requeued from the morgue",
    "deleted": "deleted from the queue",
    "deleted_from_morgue": "deleted from the morgue",
    "performed_now": "made due now",
    "killed": "moved to the morgue by an operator",
}


@dataclass(frozen=True)
class Event:
    """One thing that happened to one id. Times are Redis time, unix seconds."""

    at: float
    kind: str
    server: str | None = None
    thread: str | None = None
    fencing_token: str | None = None
    actor: str | None = None
    retry_count: int | None = None
    # failed: the next try's perform_in (retry), None when the job died; enqueued: when due
    perform_in: float | None = None
    versions: int | None = None
    error: str | None = None
    traceback: str | None = None
    # failed: whether the error is the id's own (PartialFailure) or its batch's
    own_error: bool = False
    # the other ids of the same step: a batch performed, failed or acted on together (the first 20)
    batch: tuple[str, ...] = ()
    batch_size: int = 1
    reason: str | None = None
    # a step ended by a PartialFailure: the ids that raised their own error, this one included when it did (the
    # first 20); empty when the whole batch failed together (its perform cannot say which id made it)
    raised: tuple[str, ...] = ()
    # enqueued, merged, joined_dead: the tags the push brought (docs/tags.md)
    tags: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """One line for people: what happened, and why when it says."""
        text = KINDS.get(self.kind, self.kind)
        if self.kind in ("enqueued", "merged", "joined_dead") and self.versions:
            text += f" ({self.versions} version{'s' if self.versions != 1 else ''})"
        if self.kind == "failed" and self.retry_count is not None:
            text += f" (retry {self.retry_count})"
            if self.perform_in is not None:
                text += ", retries later"
        if self.kind == "failed" and not self.own_error and self.batch_size > 1:
            text += f"; its batch of {self.batch_size} failed together"
        if self.kind == "failed" and self.own_error:
            text += "; it raised this error itself (PartialFailure)"
        if self.tags:
            text += f", tagged {', '.join(self.tags)}"
        if self.reason:
            text += f": {self.reason}"
        if self.actor is not None:
            text += f", by {self.actor or 'an unknown operator'}"
        return text

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "kind": self.kind, "summary": self.summary, "server": self.server,
                "thread": self.thread, "fencing_token": self.fencing_token, "actor": self.actor,
                "retry_count": self.retry_count, "perform_in": self.perform_in, "versions": self.versions,
                "error": self.error, "traceback": self.traceback, "own_error": self.own_error,
                "batch": list(self.batch), "batch_size": self.batch_size, "reason": self.reason,
                "raised": list(self.raised), "tags": list(self.tags)}


@dataclass
class History:
    """An id's events, newest first; ``examined`` entries of its shard were read, and ``complete`` says these
    are all the events its shard retains of it (else older ones were left: past ``limit`` or the walk's bound)."""

    id: str
    shard: int
    events: list[Event] = field(default_factory=list)
    examined: int = 0
    complete: bool = True
    # when the oldest entry examined was written: the history reaches back that far at least
    reaches_back_to: float | None = None


class IdHistories:
    def __init__(self, client: Transport | redis.Redis, keys: QueueKeys, *,
                 load_error: Callable[[bytes], str] = lambda raw: raw.decode("utf-8", "replace")) -> None:
        self.client = as_transport(client)
        self.keys = keys
        self.load_error = load_error

    def of(self, job_id: str, *, limit: int = 200, max_examined: int = MAX_EXAMINED) -> History:
        """The newest ``limit`` events of ``job_id``, newest first."""
        shard = codec.shard_of(job_id, self.keys.shards_count)
        key = self.keys.shard(shard).events_stream
        needle = job_id.encode()
        found = History(job_id, shard)
        end = "+"
        while found.examined < max_examined:
            page = self.client.pipeline_commands([(key, ("XREVRANGE", key, end, "-", "COUNT", PAGE))])[0]
            for entry_id, kind, detail in _entries(page):
                found.examined += 1
                found.reaches_back_to = _at(entry_id)
                if needle in detail:
                    # an entry's own events come oldest first: the history reads newest first
                    found.events.extend(reversed(list(self._events(entry_id, kind, detail, job_id))))
            if len(page) < PAGE:
                found.complete = len(found.events) <= limit
                del found.events[limit:]
                return found
            if len(found.events) >= limit:
                break
            end = "(" + _entries(page[-1:])[0][0]
        found.complete = False
        del found.events[limit:]
        return found

    def _events(self, entry_id: str, kind: str, detail: bytes, job_id: str) -> Iterator[Event]:
        at = _at(entry_id)
        d = msgpack.unpackb(detail, raw=True)
        if kind == "enq":
            for item in _list(d[0]):
                if _s(item[0]) == job_id:
                    state = codec.text(item[2])
                    name = {"new": "enqueued", "merged": "merged", "morgue": "joined_dead"}.get(state, state)
                    tags = tuple(_s(tag) or "" for tag in _list(item[4])) if len(item) > 4 else ()
                    yield Event(at, name, versions=int(item[1]), perform_in=_number(item[3]), tags=tags)
        elif kind == "op":
            actor, verb, ids = _s(d[0]) or "", _s(d[1]) or "", _ids(d[2])
            if job_id in ids:
                yield Event(at, OPERATOR_EVENTS.get(verb, verb), actor=actor, batch=_others(ids, job_id),
                            batch_size=len(ids))
        else:
            # a step of the shard's holder: {member id, fencing token, thread, ...} (_history.lua, history_held)
            yield from self._held(at, kind, _s(d[0]), _s(d[2]), _s(d[1]), d[3:], job_id)

    def _held(self, at: float, kind: str, server: str | None, thread: str | None, token: str | None,
              d: list[Any], job_id: str) -> Iterator[Event]:
        if kind == "run":
            ahead = len(d) > 2 and bool(d[2])  # taken ahead: performed one at a time, in order (docs/take-ahead.md)
            for name, ids in (("performed", _ids(d[0])), ("taken", _ids(d[1]))):
                if job_id in ids:
                    why = TAKEN_AHEAD if ahead and name == "taken" else None
                    yield Event(at, name, server, thread, token, batch=_others(ids, job_id), batch_size=len(ids),
                                reason=why)
        elif kind == "fail":
            yield from self._failure(at, server, thread, token, d, job_id)
        elif kind == "rel":
            if job_id in _ids(d[0]):
                yield Event(at, "performed", server, thread, token, reason="acknowledged as its server handed over")
            if job_id in _ids(d[1]):
                yield Event(at, "restored", server, thread, token,
                            reason="its server handed the shard over before finishing it")
        elif kind == "back":
            if job_id in _ids(d[0]):
                yield Event(at, "restored", server, thread, token,
                            reason="its server could not tell whether its outcome was written")
        elif kind == "untake":
            if job_id in _ids(d[0]):
                ahead = len(d) > 1 and _s(d[1]) == UNTAKE_AHEAD
                yield Event(at, "restored", server, thread, token,
                            reason="taken ahead, not started: its server stopped or handed the shard over first"
                            if ahead else "its group was at its limit (group_concurrency or group_rate_limit): back "
                                          "in its place, to start when the group may")
        elif kind == "over":
            previous, crashed = _s(d[0]), bool(d[1])
            why = (f"its server {previous} stopped renewing its lease while performing it" if crashed
                   else "the shard was taken over")
            if job_id in _ids(d[2]):
                yield Event(at, "restored", server, thread, token, reason=why)
            if job_id in _ids(d[3]):
                yield Event(at, "morgued", server, thread, token, reason=why + " (crash_limit reached)")

    def _failure(self, at: float, server: str | None, thread: str | None, token: str | None, d: list[Any],
                 job_id: str) -> Iterator[Event]:
        batch_error, acked, outcomes, crashed = d[0], _ids(d[1]), d[2], d[3]
        failed = [codec.text(o[0]) for o in _list(outcomes)]
        # A PartialFailure names the ids that raised, each with its own error; the rest of its batch was acked.
        raised = tuple(codec.text(o[0]) for o in _list(outcomes) if o[4] not in (False, None))[:20]
        if job_id in acked:
            yield Event(at, "performed", server, thread, token, batch=_others(acked + failed, job_id),
                        batch_size=len(acked) + len(failed), raised=raised,
                        reason=f"its batch's other ids {', '.join(failed[:5])} failed (PartialFailure)")
        for outcome in _list(outcomes):
            if _s(outcome[0]) != job_id:
                continue
            own = outcome[4] not in (False, None)
            error, traceback = self._error(outcome[4] if own else batch_error)
            dead = _s(outcome[2]) == "dead"
            reason = "the child process performing it died" if crashed else None
            step = failed + acked if own else failed
            yield Event(at, "failed", server, thread, token, retry_count=int(outcome[1]),
                        perform_in=None if dead else _number(outcome[3]), error=error, traceback=traceback,
                        own_error=own, batch=_others(step, job_id), batch_size=len(step), reason=reason,
                        raised=raised if own else ())
            if dead:
                n = int(outcome[3])
                yield Event(at, "morgued", server, thread, token, retry_count=int(outcome[1]), error=error,
                            reason=f"retries exhausted; {n} payload{'s' if n != 1 else ''} moved")

    def _error(self, raw: Any) -> tuple[str | None, str | None]:
        if not raw:
            return None, None
        try:
            return stored_error.load(raw, self.load_error)
        except Exception:
            text, traceback = stored_error.unpack(raw)
            return text.decode("utf-8", "replace"), traceback


def trim_call(keys: ShardKeys, max_age: float, now: float | None = None) -> lua.Call:
    """The call that drops a shard's history entries older than ``max_age`` seconds (Redis time ~ now)."""
    cutoff_ms = int(((time.time() if now is None else now) - max_age) * 1000)
    return ("history_trim", keys, (max(cutoff_ms, 0),))


def _entries(page: Any) -> list[tuple[str, str, bytes]]:
    out = []
    for entry_id, data in page:
        pairs = data.items() if isinstance(data, dict) else zip(data[0::2], data[1::2])
        values = {codec.text(k): v for k, v in pairs}
        out.append((codec.text(entry_id), codec.text(values.get("k", b"")), values.get("d", b"")))
    return out


def _at(entry_id: str) -> float:
    return int(entry_id.split("-", 1)[0]) / 1000


def _s(value: Any) -> str | None:
    if value is None or value is False:
        return None
    return codec.text(value) if isinstance(value, (bytes, str)) else str(value)


def _list(value: Any) -> list[Any]:
    # cmsgpack writes an empty table as a map
    return value if isinstance(value, list) else []


def _ids(value: Any) -> list[str]:
    return [codec.text(v) for v in _list(value)]


def _others(ids: list[str], job_id: str, limit: int = 20) -> tuple[str, ...]:
    return tuple(i for i in ids if i != job_id)[:limit]


def _number(value: Any) -> float | None:
    if value is None or value is False:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
