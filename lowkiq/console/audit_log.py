"""The audit log of operator actions, as the console's pages, the API and the ops CLI write and read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store import audit
from ..store.audit import Entry

if TYPE_CHECKING:
    from . import Console


def record(c: Console, *, who: str, source: str, action: str, worker: str, count: int,
           ids: list[str] | None = None, scope: str = "") -> None:
    """Append an entry (see ``lowkiq.store.audit.record``: clipped, and the log trimmed)."""
    audit.record(c.client, who=who, source=source, action=action, worker=worker, count=count, ids=ids, scope=scope)


def read(c: Console, limit: int = 100) -> list[Entry]:
    """The newest ``limit`` entries, newest first."""
    return audit.read(c.client, limit)
