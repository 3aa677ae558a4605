"""Every Redis key lowkiq uses is named here, and only here.

Keys of one (queue, shard) share the hash tag ``{queue:shard}`` so that a
Redis Cluster keeps each shard in one slot: every script touches one shard.
The Redis type is part of each name so a reader knows what to call on it.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "lowkiq:v1"
FORBIDDEN_IN_QUEUE_NAME = "{}"


def validate_queue_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"queue_name must be a non-empty string, got {name!r}")
    bad = [c for c in FORBIDDEN_IN_QUEUE_NAME if c in name]
    if bad:
        raise ValueError(f"queue_name {name!r} must not contain {''.join(bad)!r} (they delimit Redis Cluster hash tags)")
    return name


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard of one queue, in the order scripts receive them."""

    queue_name: str
    shard: int

    @property
    def tag(self) -> str:
        return f"{PREFIX}:{{{self.queue_name}:{self.shard}}}"

    @property
    def ids_by_perform_in_zset(self) -> str:
        return f"{self.tag}:ids_by_perform_in"

    @property
    def ids_lex_zset(self) -> str:
        return f"{self.tag}:ids_lex"

    @property
    def ids_by_retry_count_zset(self) -> str:
        """Only jobs that failed at least once (retry_count >= 0); absent means -1."""
        return f"{self.tag}:ids_by_retry_count"

    @property
    def payloads_hash(self) -> str:
        """id -> msgpack array [payload, score, payload, score, ...], ascending score."""
        return f"{self.tag}:payloads"

    @property
    def errors_hash(self) -> str:
        return f"{self.tag}:errors"

    @property
    def processing_hash(self) -> str:
        """id -> msgpack retry_count, perform_in, error, payloads: what restore needs."""
        return f"{self.tag}:processing"

    @property
    def morgue_ids_lex_zset(self) -> str:
        return f"{self.tag}:morgue_ids_lex"

    @property
    def morgue_ids_by_updated_at_zset(self) -> str:
        return f"{self.tag}:morgue_ids_by_updated_at"

    @property
    def morgue_payloads_hash(self) -> str:
        return f"{self.tag}:morgue_payloads"

    @property
    def morgue_errors_hash(self) -> str:
        return f"{self.tag}:morgue_errors"

    @property
    def counters_hash(self) -> str:
        """Fields ``processed`` and ``failed``."""
        return f"{self.tag}:counters"

    def all(self) -> list[str]:
        """The KEYS list every script receives, in the order ``scripts/_lib.lua`` names them."""
        return [
            self.ids_by_perform_in_zset,
            self.ids_lex_zset,
            self.ids_by_retry_count_zset,
            self.payloads_hash,
            self.errors_hash,
            self.processing_hash,
            self.morgue_ids_lex_zset,
            self.morgue_ids_by_updated_at_zset,
            self.morgue_payloads_hash,
            self.morgue_errors_hash,
            self.counters_hash,
        ]


@dataclass(frozen=True)
class QueueKeys:
    queue_name: str
    shards_count: int

    def __post_init__(self) -> None:
        validate_queue_name(self.queue_name)
        if not isinstance(self.shards_count, int) or isinstance(self.shards_count, bool) or self.shards_count < 1:
            raise ValueError(f"shards_count must be a positive int, got {self.shards_count!r}")

    def shard(self, shard: int) -> ShardKeys:
        return ShardKeys(self.queue_name, shard)

    def shards(self) -> list[ShardKeys]:
        return [ShardKeys(self.queue_name, s) for s in range(self.shards_count)]


def registry_hash() -> str:
    """Worker name -> JSON {queue_name, shards_count}: lets the console find queues without app code."""
    return f"{PREFIX}:registry"


def webui_secret_string() -> str:
    """A random key the console signs CSRF tokens with when none is configured,
    shared by every console process (several gunicorn workers) through Redis."""
    return f"{PREFIX}:webui:secret"
