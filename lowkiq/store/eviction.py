"""Whether Redis may evict lowkiq's data.

A Redis whose ``maxmemory-policy`` is one of the ``allkeys-*`` policies deletes keys of
its choosing when it is full: queued jobs, the morgue, a shard's processing area. Jobs
vanish without an error anywhere. ``noeviction`` (Redis refuses writes when full, which
lowkiq reports and waits out) keeps them; so does a ``volatile-*`` policy, which evicts
only keys with a time to live, and lowkiq's queues have none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

SAFE_ADVICE = "set maxmemory-policy noeviction (or a volatile-* policy)"


def evicts_jobs(policy: str | None) -> bool:
    """Whether a node with this ``maxmemory_policy`` may delete keys that hold jobs."""
    return bool(policy) and str(policy).startswith("allkeys-")


def evicting_nodes(transport: Any) -> dict[str, str]:
    """Primary name -> its policy, for every primary that may evict jobs; nodes that did not
    answer (or refuse INFO, as some managed Redis do) are left out. The dashboard's INFO read
    (lowkiq.store.metrics) asks evicts_jobs of each primary's policy the same way."""
    evicting: dict[str, str] = {}
    for node in transport.each_node(("INFO", "memory"), replicas=False):
        if isinstance(node.reply, BaseException) or not node.primary:
            continue
        policy = policy_of(node.reply)
        if evicts_jobs(policy):
            evicting[node.name] = str(policy)
    return evicting


def policy_of(info: Any) -> str | None:
    """The ``maxmemory_policy`` field of a node's INFO reply (its text)."""
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "maxmemory_policy":
            return value.strip()
    return None


def warning(nodes: Mapping[str, str]) -> str:
    """One sentence for the log: which nodes may evict jobs, and what to do."""
    named = ", ".join(f"{name} (maxmemory-policy {policy})" for name, policy in sorted(nodes.items()))
    return f"Redis may delete queued jobs when it is full: {named}; {SAFE_ADVICE}"


def check(transport: Any) -> dict[str, str]:
    """``evicting_nodes``, or nothing when Redis cannot say (INFO refused, unreachable: other checks report that)."""
    try:
        return evicting_nodes(transport)
    except (redis.RedisError, OSError):
        return {}
