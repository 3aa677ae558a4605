"""Confirmations of bulk actions: the exact jobs an operator was shown a count of.

A dry run stores the ids that match a filter under a random token, for ten minutes;
the confirmed action acts on those ids only (and of them, on those that still match
when their shard's script runs). A job that came to match after the count is never
touched, so an action touches at most what its confirmation said. A token is used
once: taking it is one script in the token's own slot.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import ConfirmationRefused as ConfirmationRefused
from ..transport import Transport
from . import lua
from .keys import ConfirmKeys

# How long a dry run's count may be confirmed, and how long a used token is remembered as used.
TTL_SECONDS = 600
# Chunks of ids read back per round trip while acting: a few hundred KB at most.
CHUNKS_PER_READ = 20
_TOKEN = re.compile(r"(?P<ms>[0-9]{13})-[A-Za-z0-9_-]{22}")


@dataclass(frozen=True)
class Pending:
    """A dry run: how many jobs matched, and the token that confirms acting on exactly those."""

    token: str
    count: int
    sample: list[str]


class Confirmations:
    def __init__(self, client: Transport) -> None:
        self.client = client

    def create(self, scope: Mapping[str, str], chunks: Iterable[list[str]], *, sample: int = 10) -> Pending:
        """Store ``chunks`` of ids under a new token that confirms ``scope`` (a few strings: what the action is)."""
        now_ms = self._redis_ms()
        keys = ConfirmKeys(f"{now_ms:013d}-{secrets.token_urlsafe(16)}")
        count, first = 0, list[str]()
        for chunk in chunks:
            if not chunk:
                continue
            count += len(chunk)
            if len(first) < sample:
                first += chunk[: sample - len(first)]
            # Each write renews the expiry: a slow count of a huge filter does not lose its first chunks.
            self.client.pipeline_commands([
                (keys.ids_list, ("RPUSH", keys.ids_list, json.dumps(chunk, ensure_ascii=False))),
                (keys.ids_list, ("EXPIRE", keys.ids_list, TTL_SECONDS)),
            ])
        # The scope is written last: until it exists the token confirms nothing.
        fields = [part for field, value in {**scope, "count": str(count)}.items() for part in (field, value)]
        self.client.pipeline_commands([
            (keys.scope_hash, ("HSET", keys.scope_hash, *fields)),
            (keys.scope_hash, ("EXPIRE", keys.scope_hash, TTL_SECONDS)),
        ])
        return Pending(keys.token, count, first)

    def take(self, token: str, scope: Mapping[str, str]) -> tuple[int, Iterator[list[str]]]:
        """Use ``token`` for ``scope``: the count it confirmed, and its ids in chunks (read as they are acted on).

        Raises ConfirmationRefused, touching nothing, when the token was used, has expired, was never
        issued, or confirms another action.
        """
        found = _TOKEN.fullmatch(token) if isinstance(token, str) else None
        if found is None:
            raise ConfirmationRefused("unknown", f"unknown confirmation token {str(token)[:80]!r}: "
                                                 f"ask for a new count (dry run) and confirm that")
        keys = ConfirmKeys(token)
        args: list[Any] = [TTL_SECONDS]
        for field, value in scope.items():
            args += [field, value]
        reply = [_text(part) for part in lua.run(self.client, "confirm_take", keys, args)]
        if reply[0] == "used":
            raise ConfirmationRefused("used", "this confirmation token was already used: ask for a new count")
        if reply[0] == "missing":
            if self._redis_ms() - int(found["ms"]) >= TTL_SECONDS * 1000:
                raise ConfirmationRefused("expired", f"this confirmation token expired ({TTL_SECONDS // 60} minutes "
                                                     f"after its count): ask for a new count")
            raise ConfirmationRefused("unknown", "unknown confirmation token: ask for a new count (dry run)")
        if reply[0] == "mismatch":
            field, value = reply[1], reply[2]
            raise ConfirmationRefused("mismatch", f"this confirmation token is for {field} {value!r}, not "
                                                  f"{scope.get(field, '')!r}: ask for a count of this action")
        return int(reply[1]), self._chunks(keys)

    def _chunks(self, keys: ConfirmKeys) -> Iterator[list[str]]:
        start = 0
        while True:
            stop = start + CHUNKS_PER_READ - 1
            [items] = self.client.pipeline_commands([(keys.ids_list, ("LRANGE", keys.ids_list, start, stop))])
            for item in items:
                yield [str(job_id) for job_id in json.loads(item)]
            if len(items) < CHUNKS_PER_READ:
                break
            start += CHUNKS_PER_READ
        self.client.pipeline_commands([(keys.ids_list, ("DEL", keys.ids_list))])

    def _redis_ms(self) -> int:
        [(seconds, micros)] = self.client.pipeline_commands([("lowkiq", ("TIME",))])
        return int(seconds) * 1000 + int(micros) // 1000


def _text(part: Any) -> str:
    return part.decode() if isinstance(part, bytes) else str(part)
