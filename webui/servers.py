"""The Servers page and api/v1/servers: the live server processes and the shards each holds."""

from __future__ import annotations

from flask import Response

from ..console.servers import live, server_json, worker_names
from .blueprint import bp
from .http import page, reply
from .state import console


@bp.get("/servers")
def servers() -> Response:
    c = console()
    members = live(c)
    return page("lowkiq/servers.html", servers=members, names=worker_names(c), now=c.clock())


@bp.get("/api/v1/servers")
def api_servers() -> Response:
    c = console()
    names = worker_names(c)
    return reply({"servers": [server_json(m, names) for m in live(c)]})
