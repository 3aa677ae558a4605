"""A worker's groups as operators see them (the tenant view), and pausing one of them.

``groups(c, view)`` lists each group with its queued ids, its busy ids, how long its oldest due id has waited
and whether it is paused. ``pause(c, view, group, ...)`` / ``resume(...)`` hold or free one group in every
shard of the worker (``lowkiq.store.group_pausing``) and record the action, with who did it, in the audit log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store import audit, group_pausing
from ..store.group_pausing import GroupRow, checked_group
from ..store.pausing import PAUSE, RESUME, Pause

if TYPE_CHECKING:
    from . import Console, WorkerView

__all__ = ["PAUSE", "RESUME", "GroupRow", "checked_group", "groups", "pause", "paused", "resume"]


def groups(c: Console, view: WorkerView) -> list[GroupRow]:
    """The worker's groups, most queued first (paused ones always listed)."""
    return group_pausing.read_groups(c.client, view.keys, c.clock())


def paused(c: Console, view: WorkerView) -> dict[str, Pause]:
    """The worker's paused groups, by name."""
    return group_pausing.paused_groups(c.client, view.keys)


def pause(c: Console, view: WorkerView, group: str, *, who: str, source: str) -> bool:
    """Hold ``group``'s queued ids (busy ones finish); False when it was paused already. Audited."""
    return _set(c, view, group, PAUSE, who=who, source=source)


def resume(c: Console, view: WorkerView, group: str, *, who: str, source: str) -> bool:
    """Let a paused group's ids run again, in their order; False when it was not paused. Audited."""
    return _set(c, view, group, RESUME, who=who, source=source)


def _set(c: Console, view: WorkerView, group: str, verb: str, *, who: str, source: str) -> bool:
    group = checked_group(group)
    changed = group_pausing.set_paused(c.client, view.keys, group, verb, who=who, source=source) > 0
    done = "paused" if verb == PAUSE else "resumed"
    unchanged = "was paused already" if verb == PAUSE else "was not paused"
    scope = f"group {group} {done}" if changed else f"group {group} {unchanged}"
    audit.record(c.client, who=who, source=source, action=f"group/{verb}", worker=view.name, count=0, scope=scope)
    return changed
