"""Who acts in the console, and the audit entry each action leaves.

The name is the host app's (``LOWKIQ_WEB_CURRENT_USER``: a callable returning the
signed-in user's name), else the basic-auth user of the standalone console, else
"anonymous" with the client's address.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask import current_app, request

from .. import audit
from .console import Console, WorkerView
from .operations import Operation

CURRENT_USER_HOOK = "LOWKIQ_WEB_CURRENT_USER"


def actor() -> str:
    hook = current_app.config.get(CURRENT_USER_HOOK)
    if callable(hook):
        name = hook()
        if name:
            return str(name)[:200]
    auth = request.authorization
    if auth is not None and auth.username:
        return auth.username[:200]
    return f"anonymous ({request.remote_addr or 'unknown address'})"


def record(c: Console, op: Operation, view: WorkerView, ids: Sequence[str], count: int, source: str) -> None:
    audit.record(c.client, who=actor(), source=source, action=op.path, worker=view.name, count=count,
                 ids=list(ids), scope="" if op.takes_ids else "all")
