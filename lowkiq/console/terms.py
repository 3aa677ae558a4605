"""The store's names that the console's surfaces (lowkiq.webui and the ops CLI) show or check against: the
orders of a listing, the bounds of a read, and the values reads return. The surfaces take them from here, so
that ``lowkiq.console`` stays their one door to what Redis keeps."""

from __future__ import annotations

from ..store.actions import Actions
from ..store.audit import AUDIT_BYTES, AUDIT_KEEP, ID_CHARS, IDS_BYTES, IDS_KEPT, Entry
from ..store.confirmations import TTL_SECONDS, ConfirmationRefused
from ..store.id_history import KINDS as HISTORY_KINDS
from ..store.membership import Member
from ..store.metrics import CONSOLE_SHARD_BUDGET, QueueMetrics
from ..store.minute_totals import Minute
from ..store.queries import ENQUEUED_ORDERS, MAX_LIMIT, MORGUE_ORDERS, ROW_BYTES, ROW_ERROR_BYTES
from ..store.registry import BrokenEntry, WorkerInfo
from ..store.search import MAX_NEEDLE, PAGE_EXAMINED, Continuation

__all__ = [
    "AUDIT_BYTES", "AUDIT_KEEP", "CONSOLE_SHARD_BUDGET", "ENQUEUED_ORDERS", "HISTORY_KINDS", "IDS_BYTES", "IDS_KEPT",
    "ID_CHARS", "MAX_LIMIT", "MAX_NEEDLE", "MORGUE_ORDERS", "PAGE_EXAMINED", "ROW_BYTES", "ROW_ERROR_BYTES",
    "TTL_SECONDS", "Actions", "BrokenEntry", "ConfirmationRefused", "Continuation", "Entry", "Member", "Minute",
    "QueueMetrics", "WorkerInfo",
]
