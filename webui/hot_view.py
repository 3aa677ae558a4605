"""A worker's hot ids: the Hot ids tab and ``GET api/v1/workers/<w>/hot`` (lowkiq.console.hot)."""

from __future__ import annotations

from flask import Response

from ..console import hot
from .blueprint import bp
from .http import page, reply
from .state import console


@bp.get("/workers/<worker>/hot")
def hot_page(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    found = hot.hot_ids(c, view)
    return page("lowkiq/hot.html", view=view, found=found, tab="hot", now=c.clock(), window=hot.WINDOW,
                budget=hot.HOT_ENTRIES, per_shard=hot.per_shard(view.info.shards_count))


@bp.get("/api/v1/workers/<worker>/hot")
def api_hot(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    return reply(hot.as_json(view, hot.hot_ids(c, view)))
