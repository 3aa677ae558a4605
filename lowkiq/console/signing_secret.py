"""The secret that signs the web console's sessions and CSRF tokens when none is configured: made once, kept in
Redis, so that every replica of the console signs alike."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from ..store.keys import webui_secret_string

if TYPE_CHECKING:
    from . import Console


def key_name() -> str:
    """The Redis key that holds it."""
    return webui_secret_string()


def stored(c: Console) -> bytes | None:
    """The secret kept in Redis, made by whichever console asked first; None when it vanished between the
    write and the read (never sign with an empty key)."""
    key = key_name()
    c.client.set(key, secrets.token_hex(32), nx=True)
    value = c.client.get(key)
    return value.encode() if isinstance(value, str) else value
