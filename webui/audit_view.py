"""The Audit page: the newest operator actions, from the console, the API and the CLI."""

from __future__ import annotations

from flask import Response

from .. import audit
from .blueprint import bp
from .state import console
from .views import page

SHOWN = 200


@bp.get("/audit")
def audit_page() -> Response:
    c = console()
    return page("lowkiq/audit.html", entries=audit.read(c.client, SHOWN), now=c.clock(), audit_page=True)
