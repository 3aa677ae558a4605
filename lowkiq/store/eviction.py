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
    answer (or refuse INFO, as some managed Redis do) are left out. Read as the dashboard reads it."""
    from .metrics import redis_info  # it uses evicts_jobs: imported here, not at the top

    evicting: dict[str, str] = redis_info(transport.each_node(("INFO", "memory"), replicas=False))["evicting"]
    return evicting


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
