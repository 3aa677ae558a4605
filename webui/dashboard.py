"""What the dashboard shows, for its page and for api/v1/dashboard alike: totals, a row per worker, the
servers, the stale workers and Redis, read in one round trip, and what needs attention (console/attention.py)."""

from __future__ import annotations

from typing import Any

from ..console import Console
from . import minute_chart


def dashboard_data(c: Console) -> dict[str, Any]:
    """Totals, a row per worker and Redis info: one round trip."""
    rows, redis_info, members = c.dashboard()
    now = c.clock()
    totals = {
        "processed": sum(m.processed for _, m in rows),
        "failed": sum(m.failed for _, m in rows),
        "busy": sum(m.busy for _, m in rows),
        "enqueued": sum(m.length for _, m in rows),
        "fresh": sum(m.fresh for _, m in rows),
        "retries": sum(m.retries for _, m in rows),
        "dead": sum(m.morgue_length for _, m in rows),
        "held": sum(m.morgue_length for view, m in rows if view.info.holds_dead_ids),
        "lag": max((m.lag for _, m in rows), default=0.0),
    }
    minute_chart.record(c, [m for _, m in rows], now)
    from ..console import attention
    from ..console.servers import unserved
    from .stale import stale_workers

    band = attention.read(c, rows, members, now)
    return {
        "servers": members,
        "unserved": unserved(c, rows, members),
        "attention": band,
        "stalled": band.stalled,
        "long_performs": band.long_performs,
        "stale": stale_workers(c, rows, members, now),
        "rows": rows,
        "broken": c.broken(),
        "totals": totals,
        "redis": redis_info,
        "now": now,
        "source": c.source,
    }
