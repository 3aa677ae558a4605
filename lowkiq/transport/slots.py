"""Redis Cluster hash slots: CRC16 of a key's hash tag, modulo 16384.

Every keyset lowkiq hands to a script (one shard's keys, or the membership
keys) shares one hash tag, so one slot; it is computed once per keyset.
"""

from __future__ import annotations

from binascii import crc_hqx
from collections.abc import Hashable
from functools import lru_cache
from typing import Protocol

SLOTS = 16384


class Keyset(Hashable, Protocol):
    """Keys that one script receives, all in one hash slot."""

    def all(self) -> list[str]: ...


def key_slot(key: str | bytes) -> int:
    """The slot of a key: of the part between the first ``{`` and the next ``}``, when not empty."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % SLOTS


@lru_cache(maxsize=65536)
def keyset_slot(keyset: Keyset) -> int:
    """The one slot of a keyset's keys; a keyset whose keys span slots is a bug a cluster would refuse."""
    slots = {key_slot(k) for k in keyset.all()}
    if len(slots) != 1:
        raise ValueError(f"the keys of {keyset!r} are not in one hash slot: {sorted(slots)}")
    return slots.pop()


@lru_cache(maxsize=65536)
def routing_slot(key: str | bytes) -> int:
    """key_slot, cached: the console reads the same keys on every poll."""
    return key_slot(key)
