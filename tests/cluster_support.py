"""Helpers of the cluster tests: queues whose shards cover every primary, slot moves by hand."""

from __future__ import annotations

import itertools
import time
from typing import Any

from redis_cluster import RedisCluster

import lowkiq
from lowkiq.store.keys import QueueKeys


def covering_queue(cluster: RedisCluster, prefix: str, shards_count: int) -> str:
    """A queue name whose ``shards_count`` shards cover every primary (checked with CLUSTER KEYSLOT)."""
    primaries = set(cluster.primaries())
    for n in itertools.count():
        name = f"{prefix}{n}"
        owners = {cluster.owner(cluster.keyslot(shard.tag)) for shard in QueueKeys(name, shards_count).shards()}
        if owners == primaries:
            return name
        if n > 200:
            raise AssertionError(f"no queue name covers the primaries {primaries} with {shards_count} shards")
    raise AssertionError("unreachable")


def covering_worker(cluster: RedisCluster, prefix: str, shards_count: int = 6,
                    **attributes: Any) -> type[lowkiq.Worker]:
    """A Worker class whose shards cover every primary."""

    def perform(self: Any, payloads_by_id: Any) -> None:
        pass

    name = covering_queue(cluster, prefix, shards_count)
    body = {"shards_count": shards_count, "queue_name": name, "perform": perform}
    return type(f"{prefix.title()}Worker", (lowkiq.Worker,), {**body, **attributes})


def open_migration(cluster: RedisCluster, slot: int, target: int) -> int:
    """Mark ``slot`` MIGRATING on its owner and IMPORTING on ``target``; returns the owner's port."""
    source = cluster.owner(slot)
    cluster.client(target).execute_command("CLUSTER SETSLOT", slot, "IMPORTING", cluster.node_id(source))
    cluster.client(source).execute_command("CLUSTER SETSLOT", slot, "MIGRATING", cluster.node_id(target))
    return source


def migrate_keys(cluster: RedisCluster, slot: int, source: int, target: int, keys: list[str] | None = None) -> int:
    """MIGRATE the slot's keys (or the given ones) from source to target; returns how many moved."""
    src = cluster.client(source)
    moved = 0
    while True:
        # (EXISTS would answer ASK for a key already moved: the slot's key list says what is left)
        present = [_text(k) for k in src.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000)]
        batch = present if keys is None else [k for k in keys if k in present]
        if not batch:
            return moved
        src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *batch)
        moved += len(batch)


def close_migration(cluster: RedisCluster, slot: int, target: int, timeout: float = 10.0) -> None:
    """The slot belongs to ``target`` now: told to the target first, then to every other primary; returns once
    every live node, replicas included (they learn it by gossip), names ``target`` as its owner, so that the
    next look at the slot map (``cluster.owner``, which may ask a replica) is not the old one."""
    target_id = cluster.node_id(target)
    cluster.client(target).execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
    for port in cluster.primaries():
        if port != target:
            cluster.client(port).execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
    deadline = time.monotonic() + timeout
    while True:
        stale = [port for port in cluster.alive()
                 if next((p for start, end, p in cluster.slot_owners(cluster.client(port)) if start <= slot <= end),
                         None) != target]
        if not stale:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes {stale} still name another owner of slot {slot} {timeout} s after it moved to {target}")
        time.sleep(0.02)


def move_slot(cluster: RedisCluster, slot: int, target: int) -> int:
    """The whole migration of one slot with its keys; returns the former owner's port."""
    source = open_migration(cluster, slot, target)
    migrate_keys(cluster, slot, source, target)
    close_migration(cluster, slot, target)
    cluster.wait_ok()
    return source


def other_primary(cluster: RedisCluster, port: int) -> int:
    return next(p for p in cluster.primaries() if p != port)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
