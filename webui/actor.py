"""Who acts in the console, and the audit entry each action leaves.

Only identities someone verified are recorded: the host app's (``LOWKIQ_WEB_CURRENT_USER``:
a callable returning the signed-in user's name), else the console's own basic-auth user once
``security.check_auth`` has checked the password, else "anonymous" with the client's address.
A name in an ``Authorization`` header nobody checked (a console without a password, a host
app's routes) is what the client claims, and an audit log must not repeat a claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask import current_app, g, request

from ..console import Console, WorkerView, audit_log
from ..console.operations import Operation
from .state import settings

CURRENT_USER_HOOK = "LOWKIQ_WEB_CURRENT_USER"


def actor() -> str:
    hook = current_app.config.get(CURRENT_USER_HOOK)
    if callable(hook):
        name = hook()
        if name:
            return str(name)[:200]
    if g.get("lowkiq_authenticated"):  # set by security.check_auth, only when the password matched
        return settings().user[:200]
    return f"anonymous ({request.remote_addr or 'unknown address'})"


def record(c: Console, op: Operation, view: WorkerView, ids: Sequence[str], count: int, source: str) -> None:
    audit_log.record(c, who=actor(), source=source, action=op.path, worker=view.name, count=count,
                     ids=list(ids), scope="" if op.takes_ids else "all")


def run_operation(c: Console, op: Operation, view: WorkerView, ids: list[str], source: str) -> int:
    """An operation, audited: on ids, one entry; on a whole area, in chunks, an entry when it starts
    and one when it ends (or is cut off)."""
    if not op.takes_ids:
        return c.act_on_all(view, op.method, who=actor(), source=source, action=op.path)
    count = op.run(c.actions(view, actor()), ids)
    record(c, op, view, ids, count, source)
    return count
