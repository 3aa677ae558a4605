"""The Audit page: the newest operator actions, from the console, the API and the CLI."""

from __future__ import annotations

from flask import Response

from ..console import audit_log
from ..console.terms import AUDIT_BYTES, AUDIT_KEEP, ID_CHARS, IDS_BYTES, IDS_KEPT
from .blueprint import bp
from .http import int_arg, page, reply
from .state import console

SHOWN = 200


@bp.get("/audit")
def audit_page() -> Response:
    c = console()
    return page("lowkiq/audit.html", entries=audit_log.read(c, SHOWN), now=c.clock(), audit_page=True,
                keep=AUDIT_KEEP, kept_bytes=AUDIT_BYTES, ids_kept=IDS_KEPT, ids_bytes=IDS_BYTES, id_chars=ID_CHARS)


@bp.get("/api/v1/audit")
def api_audit() -> Response:
    """The newest entries, newest first: ``?limit=`` 1..1000 (default 100)."""
    limit = int_arg("limit", 100, 1, 1000)
    return reply({"entries": [entry.as_json() for entry in audit_log.read(console(), limit)]})
