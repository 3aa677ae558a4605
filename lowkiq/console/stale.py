"""Stale workers: known to the registry, served by no live server, and not registered for a while.

The rule is one, for the dashboard's mark and for forget (``webui/stale.py`` says why forgetting is
guarded so): no live server serves the worker's queue, and nothing registered it for ``after`` seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..store import registry
from ..store.keys import QueueKeys, registry_hash
from ..store.membership import Member
from ..store.metrics import MetricsReader, QueueMetrics
from ..store.registry import BrokenEntry, WorkerInfo

if TYPE_CHECKING:
    from . import Console, WorkerView


def served_queues(members: Iterable[Member]) -> set[str]:
    """The queues some live server serves."""
    return {queue for m in members for queue, _ in m.queues}


def is_stale(info: WorkerInfo, served: set[str], now: float, after: float) -> bool:
    """The one rule, for the dashboard's mark and for forget: no live server serves the worker's queue,
    and nothing registered it for ``after`` seconds."""
    return info.queue_name not in served and now - info.registered_at > after


def stale_workers(c: Console, rows: Sequence[tuple[WorkerView, Any]], members: Sequence[Member],
                  now: float, after: float) -> set[str]:
    """Names of the stale workers among ``rows``; none for an app-configured console (its code defines them)."""
    if c.source != "registry":
        return set()
    served = served_queues(members)
    return {view.name for view, _ in rows if is_stale(view.info, served, now, after)}


def entry_now(c: Console, name: str) -> tuple[bytes | str, WorkerInfo | BrokenEntry] | None:
    """The worker's registry entry as it is now (not as the console's registry cache last read it), raw and
    parsed; None when it is gone."""
    raw = c.client.hget(registry_hash(), name)
    if raw is None:
        return None
    return raw, registry.parse(name, raw)


def queue_now(c: Console, info: WorkerInfo, now: float) -> tuple[QueueMetrics, list[Member]]:
    """The queue's numbers and the live servers, in one round trip."""
    [m], _, members = MetricsReader(c.client).read_with_members([QueueKeys(info.queue_name, info.shards_count)], now,
                                                               with_info=False)
    return m, members


def forget_unchanged(c: Console, name: str, raw: bytes | str) -> bool:
    """Forget ``name`` only if its entry is still ``raw`` (one a server wrote since stays); whether it was."""
    return registry.forget_unchanged(c.client, name, raw)
