"""Operators' requests to stop a process-isolated perform, as Redis holds them: beside the shard's lease.

The console, the API and the CLI cannot signal a process on another host. They write the request into
the shard's lease hash (``stop_request.lua``: one script in the shard's slot), bound to the batch in
processing there: the lease's grant and its take's ``taken_ms``, so that a request never stops a later
batch, nor one of another server that took the shard over. The server performing the batch reads it
(``requested``: one HMGET) every ``isolation.STOP_POLL`` seconds while it waits on the batch's child,
kills the child's process group and fails the batch with ``PerformStopped``. A request nobody honoured
(the perform returned first) stays until the next one replaces it, harmless: it names a batch that is over.
"""

from __future__ import annotations

from collections.abc import Collection

import redis

from ..transport import Transport, as_transport
from . import lua
from .keys import ShardKeys
from .leases import Lease

# What ``request`` answers.
REQUESTED = 1  # written: the server performing it stops it within a poll
NOT_BUSY = 0  # the id is not in processing
NO_SERVER = 2  # in processing, but no live server holds its shard: it goes back to the queue at the takeover

FIELDS = ("grant", "taken_ms", "stop_id", "stop_grant", "stop_taken_ms", "stop_by")


def request(client: Transport | redis.Redis, keys: ShardKeys, job_id: str, who: str) -> int:
    """Ask the server performing ``job_id`` (of the shard ``keys``) to stop it: REQUESTED, NOT_BUSY or
    NO_SERVER. ``who`` is named in the batch's error."""
    return int(lua.run(client, "stop_request", keys, (job_id, who)))


def requested(client: Transport | redis.Redis, lease: Lease, ids: Collection[str]) -> str | None:
    """Who asked to stop the batch that ``lease``'s holder performs now (of ``ids``), or None."""
    key = lease.keys.lease_hash
    [(grant, taken, stop_id, stop_grant, stop_taken, stop_by)] = as_transport(client).pipeline_commands(
        [(key, ("HMGET", key, *FIELDS))])
    if stop_id is None or _text(stop_id) not in ids:
        return None
    if grant is None or _text(grant) != lease.grant or stop_grant != grant or stop_taken != taken:
        return None
    return _text(stop_by) if stop_by else "an operator"


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
