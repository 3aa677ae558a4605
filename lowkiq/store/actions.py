"""Operators' bulk actions on one queue. Each answers how many jobs it touched.

An action on given ids is one script per shard, all shards in one pipelined round trip
(of wall time, on a cluster: every node at once). An action on a whole area ("requeue
all", "kill all failed", ...) runs in chunks of ``CHUNK`` jobs per script, every shard's
chunk in one round trip, until each shard is done: no script's run time grows with the
queue, so producers and servers never wait behind an operator's button. Each chunk is
atomic, so an action cut off midway leaves every job either done or untouched, and
running it again finishes it. When some shards' scripts ran and others failed,
``PartialWrite`` says which ran.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis

from ..transport import Transport, as_transport
from ..transport.errors import checked
from . import codec, lua
from .keys import WAKE_CHANNEL, QueueKeys, ShardKeys
from .search import Content

# Jobs per script of an action on a whole area. Moving a job to the morgue, the heaviest step,
# costs Redis about 20 µs: a chunk stays near 10 ms, well under the 50 ms an operator's button
# may hold Redis at any queue size.
CHUNK = 500
# The indexes a filter may name, by area: what ``Filter.index`` means to the scripts.
FILTER_INDEXES = {"enqueued": ("id", "perform_in", "retry_count"), "morgue": ("id", "updated_at")}

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Filter:
    """Jobs whose ``index`` ("id", "perform_in", "retry_count" or "updated_at") lies within ``lo``..``hi``,
    inclusive (an empty bound is open), and whose content matches ``content`` when given. An action given
    a filter touches only the ids given that still match it when their shard's script runs."""

    index: str
    lo: Any = None
    hi: Any = None
    # With a content filter (lowkiq.store.search.Content) and its area ("enqueued" or "morgue"), each id's
    # error and payloads are checked too, by the same test the search that counted it used.
    content: Content | None = None
    area: str = "enqueued"
    # With a tag (docs/tags.md): only the ids that still carry it.
    tag: str = ""

    def args(self) -> tuple[str, ...]:
        tagged = ("tagged", self.tag) if self.tag else ()
        bounds = (self.index, self._bound(self.lo, "min"), self._bound(self.hi, "max"))
        if self.content:
            return (*tagged, "match_content", *bounds, self.area, *self.content.args(), self.content.case_arg())
        return (*tagged, "match", *bounds)

    def _bound(self, value: Any, name: str) -> str:
        if value is None or value == "":
            return ""
        if self.index == "id":
            return str(value)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number when filtering by {self.index}, got {value!r}") from None
        if math.isnan(number):
            raise ValueError(f"{name} must be a number when filtering by {self.index}, got NaN")
        return "" if math.isinf(number) else repr(number)


class Actions:
    def __init__(self, client: Transport | redis.Redis, keys: QueueKeys, *, clock: Callable[[], float] = time.time,
                 actor: str = "") -> None:
        self.client = as_transport(client)
        self.keys = keys
        self.clock = clock
        # Who acts: each touched id's history names them (docs/history.md).
        self.actor = actor
        self._shards = keys.shards()

    # ---- on given ids (optionally only those still matching a filter) ------------------

    def morgue_requeue(self, ids: Iterable[str], *, within: Filter | None = None) -> int:
        """Morgue jobs back to the queue: perform_in = now, retry_count = -1, merged with a queued job."""
        now = lua.now_arg(self.clock)
        return self._by_ids("morgue_requeue", ids, (now,), within, wake=True)

    def morgue_delete(self, ids: Iterable[str], *, within: Filter | None = None) -> int:
        return self._by_ids("morgue_delete", ids, (), within)

    def delete(self, ids: Iterable[str], *, within: Filter | None = None) -> int:
        """Delete queued jobs (not those in processing)."""
        return self._by_ids("delete", ids, (), within)

    def perform_now(self, ids: Iterable[str], *, within: Filter | None = None) -> int:
        """These queued jobs, when scheduled in the future, become ready now."""
        return self._by_ids("perform_all_now", ids, (lua.now_arg(self.clock),), within, wake=True)

    def kill(self, ids: Iterable[str], *, within: Filter | None = None) -> int:
        """These queued jobs go to the morgue (whatever their retry count), with all their payloads and error."""
        return self._by_ids("kill_failed", ids, (lua.now_arg(self.clock),), within)

    # ---- on a whole area, in chunks ---------------------------------------------------

    def morgue_requeue_all(self, *, progress: Progress | None = None) -> int:
        return self._chunked("morgue_requeue", lambda: (lua.now_arg(self.clock),), _zcard("morgue_ids_lex_zset"),
                             progress, wake=True)

    def morgue_delete_all(self, *, progress: Progress | None = None) -> int:
        return self._chunked("morgue_delete", tuple, _zcard("morgue_ids_lex_zset"), progress)

    def delete_all(self, *, progress: Progress | None = None) -> int:
        return self._chunked("delete", tuple, _zcard("ids_by_perform_in_zset"), progress)

    def perform_all_now(self, *, progress: Progress | None = None) -> int:
        """Every job scheduled in the future becomes ready now."""
        return self._chunked("perform_all_now", lambda: (lua.now_arg(self.clock),), _zcard("ids_by_perform_in_zset"),
                             progress, wake=True)

    def kill_failed(self, *, progress: Progress | None = None) -> int:
        """Every job with retry_count >= 0 goes to the morgue, with all its payloads and its error."""
        return self._chunked("kill_failed", lambda: (lua.now_arg(self.clock),), _zcard("ids_by_retry_count_zset"),
                             progress)

    def delete_failed(self, *, progress: Progress | None = None) -> int:
        """Every job with retry_count >= 0 is deleted."""
        return self._chunked("delete_failed", tuple, _zcard("ids_by_retry_count_zset"), progress)

    def _chunked(self, name: str, head: Callable[[], tuple[Any, ...]],
                 size: Callable[[ShardKeys], tuple[str, tuple[Any, ...]]], progress: Progress | None, *,
                 wake: bool = False) -> int:
        """``name`` on every shard, a chunk per script, until each shard is done.

        A shard is done when a chunk touched fewer than asked, or when it touched as many jobs as
        the shard held when the action began: jobs that keep arriving (new failures, new jobs)
        cannot keep an action running forever, and it touches at most what it found.
        """
        left = {shard: int(n) for shard, n in zip(self._shards, self.client.pipeline_commands(
            [size(shard) for shard in self._shards]))}
        touched = 0
        while True:
            active = [shard for shard in self._shards if left[shard] > 0]
            if not active:
                return touched
            asked = [min(CHUNK, left[shard]) for shard in active]
            calls: list[lua.Call] = [(name, shard, (self.actor, *head(), "all", n)) for shard, n in zip(active, asked)]
            for shard, limit, n in zip(active, asked, self._run(calls, wake)):
                left[shard] = 0 if n < limit else left[shard] - n
                touched += n
            if progress is not None:
                progress(touched)

    def _by_ids(self, name: str, ids: Iterable[str], head: tuple[Any, ...], within: Filter | None, *,
                wake: bool = False) -> int:
        target = within.args() if within is not None else ("ids",)
        groups: dict[int, list[str]] = {}
        for job_id in dict.fromkeys(str(i) for i in ids):
            groups.setdefault(codec.shard_of(job_id, self.keys.shards_count), []).append(job_id)
        calls: list[lua.Call] = [(name, self._shards[shard], (self.actor, *head, *target, *shard_ids))
                                 for shard, shard_ids in sorted(groups.items())]
        return sum(self._run(calls, wake))

    def _run(self, calls: list[lua.Call], wake: bool) -> list[int]:
        if not calls:
            return []
        if not wake:
            return [int(n) for n in lua.run_many(self.client, calls)]
        # Jobs made due now: their shards' servers wake instead of finding them a poll later. Each
        # PUBLISH follows its shard's script on that node's connection, so a woken server finds the work.
        wakes = [(keys.lease_hash, ("PUBLISH", WAKE_CHANNEL, keys.wake_message)) for _, keys, _ in calls
                 if isinstance(keys, ShardKeys)]
        replies, _ = lua.run_many_with(self.client, calls, wakes)
        return [int(n) for n in checked(replies, calls)]


def _zcard(attribute: str) -> Callable[[ShardKeys], tuple[str, tuple[Any, ...]]]:
    """The command that counts one shard's jobs in the index named by ``attribute`` of ShardKeys."""

    def command(shard: ShardKeys) -> tuple[str, tuple[Any, ...]]:
        key = getattr(shard, attribute)
        return key, ("ZCARD", key)

    return command
