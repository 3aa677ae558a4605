"""Operators' bulk actions on one queue. Each answers how many jobs it touched.

Every action is one script per shard (atomic per shard), all shards in one
pipelined round trip (of wall time, on a cluster: every node at once). When
some shards' scripts ran and others failed, ``PartialWrite`` says which ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import redis

from ..transport import Transport, as_transport
from ..transport.errors import checked
from . import codec, lua
from .keys import WAKE_CHANNEL, QueueKeys, ShardKeys


class Actions:
    def __init__(self, client: Transport | redis.Redis, keys: QueueKeys, *, clock: Callable[[], float] = time.time) -> None:
        self.client = as_transport(client)
        self.keys = keys
        self.clock = clock
        self._shards = keys.shards()

    def morgue_requeue(self, ids: Iterable[str]) -> int:
        """Morgue jobs back to the queue: perform_in = now, retry_count = -1, merged with a queued job."""
        now = lua.now_arg(self.clock)
        return self._by_ids("morgue_requeue", ids, lambda shard_ids: (now, "ids", *shard_ids), wake=True)

    def morgue_requeue_all(self) -> int:
        return self._every_shard("morgue_requeue", (lua.now_arg(self.clock), "all"), wake=True)

    def morgue_delete(self, ids: Iterable[str]) -> int:
        return self._by_ids("morgue_delete", ids, lambda shard_ids: ("ids", *shard_ids))

    def morgue_delete_all(self) -> int:
        return self._every_shard("morgue_delete", ("all",))

    def delete(self, ids: Iterable[str]) -> int:
        """Delete queued jobs (not those in processing)."""
        return self._by_ids("delete", ids, lambda shard_ids: ("ids", *shard_ids))

    def delete_all(self) -> int:
        return self._every_shard("delete", ("all",))

    def perform_all_now(self) -> int:
        """Every job scheduled in the future becomes ready now."""
        return self._every_shard("perform_all_now", (lua.now_arg(self.clock), "all"), wake=True)

    def perform_now(self, ids: Iterable[str]) -> int:
        """These queued jobs, when scheduled in the future, become ready now."""
        now = lua.now_arg(self.clock)
        return self._by_ids("perform_all_now", ids, lambda shard_ids: (now, "ids", *shard_ids), wake=True)

    def kill_failed(self) -> int:
        """Every job with retry_count >= 0 goes to the morgue, with all its payloads and its error."""
        return self._every_shard("kill_failed", (lua.now_arg(self.clock), "failed"))

    def kill(self, ids: Iterable[str]) -> int:
        """These queued jobs go to the morgue (whatever their retry count), with all their payloads and error."""
        now = lua.now_arg(self.clock)
        return self._by_ids("kill_failed", ids, lambda shard_ids: (now, "ids", *shard_ids))

    def delete_failed(self) -> int:
        """Every job with retry_count >= 0 is deleted."""
        return self._every_shard("delete_failed", ())

    def _every_shard(self, name: str, args: tuple[Any, ...], *, wake: bool = False) -> int:
        return self._run([(name, shard, args) for shard in self._shards], wake)

    def _by_ids(self, name: str, ids: Iterable[str], args: Callable[[list[str]], tuple[Any, ...]], *,
                wake: bool = False) -> int:
        groups: dict[int, list[str]] = {}
        for job_id in dict.fromkeys(str(i) for i in ids):
            groups.setdefault(codec.shard_of(job_id, self.keys.shards_count), []).append(job_id)
        return self._run([(name, self._shards[shard], args(shard_ids)) for shard, shard_ids in sorted(groups.items())],
                         wake)

    def _run(self, calls: list[lua.Call], wake: bool) -> int:
        if not wake:
            return sum(lua.run_many(self.client, calls))
        # Jobs made due now: their shards' servers wake instead of finding them a poll later. Each
        # PUBLISH follows its shard's script on that node's connection, so a woken server finds the work.
        wakes = [(keys.lease_hash, ("PUBLISH", WAKE_CHANNEL, keys.wake_message)) for _, keys, _ in calls
                 if isinstance(keys, ShardKeys)]
        replies, _ = lua.run_many_with(self.client, calls, wakes)
        return sum(checked(replies, calls))
