"""Workers known to Redis, so the standalone console can find queues without the app's code.

Any client can write this hash, so every entry is checked when written and again when
read: an entry that is not what ``register`` writes comes back as a ``BrokenEntry``
naming its problem, and never stops the other workers from being read.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import RegistryFull as RegistryFull

# Declared and checked with the rest of a worker's attributes; importable from here too.
from ..spec import ISOLATIONS as ISOLATIONS
from ..spec import MAX_SHARDS_COUNT as MAX_SHARDS_COUNT
from ..spec import MORGUE_POLICIES as MORGUE_POLICIES
from ..spec import WorkerSpec, check_count, check_one_of, check_time_limit
from ..spec import check_positive as check_positive
from ..spec import check_shards_count as check_shards_count
from ..transport import Transport
from . import lua
from .keys import RegistryKeys, validate_queue_name

# Workers the registry holds at most. Every console page reads the whole registry, and the
# dashboard, the stats API and a Prometheus scrape list every worker: 500 keeps that read
# under 100 KB as register() writes it (2 MB at worst, entries being at most MAX_ENTRY_BYTES)
# and the dashboard a page long, while allowing ten times the queues of the largest apps seen.
MAX_WORKERS = 500
# An entry is a short JSON object; anything longer was not written by register().
MAX_ENTRY_BYTES = 4096
# The name of the row that says the registry holds more entries than a console reads: a name no
# worker can have (validate_queue_name refuses parentheses and spaces).
UNREAD = "(entries not read)"


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    queue_name: str
    shards_count: int
    max_retry_count: int = 25
    batch_size: int = 1
    # unix time of the last registration (a server's start, a producer's first enqueue); 0 when unknown
    registered_at: float = field(default=0.0, compare=False)
    time_limit: float | None = None  # seconds; None: no limit
    isolation: str = "thread"
    morgue_policy: str = "oldest_payload"

    @property
    def holds_dead_ids(self) -> bool:
        """Whether every id in the morgue is held: later payloads join it instead of being performed."""
        return self.morgue_policy == "whole_id"


@dataclass(frozen=True)
class BrokenEntry:
    """A registry entry that cannot be used, and why (for the console's broken rows)."""

    name: str
    problem: str


def checked(info: WorkerInfo) -> WorkerInfo:
    """``info`` if every field is valid, else ValueError (TypeError for a value of the wrong type) naming the
    first bad one: the checks of the worker's class definition (lowkiq.spec)."""
    validate_queue_name(info.name, "worker name")
    validate_queue_name(info.queue_name)
    check_shards_count(info.shards_count)
    check_count(info.max_retry_count, "max_retry_count")
    check_positive(info.batch_size, "batch_size")
    check_time_limit(info.time_limit)
    check_one_of(info.isolation, ISOLATIONS, "isolation")
    check_one_of(info.morgue_policy, MORGUE_POLICIES, "morgue_policy")
    return info


def info_of(worker: type[WorkerSpec]) -> WorkerInfo:
    return WorkerInfo(worker.__name__, worker.queue_name, worker.shards_count, worker.max_retry_count, worker.batch_size,
                      time_limit=worker.time_limit, isolation=worker.isolation, morgue_policy=worker.morgue_policy)


def register(client: Transport | redis.Redis, workers: Iterable[type[WorkerSpec]]) -> None:
    """Record ``workers`` for the console: every one, or none (ValueError naming a bad field, or RegistryFull)."""
    mapping: dict[str, str] = {}
    for w in workers:
        info = checked(info_of(w))
        mapping[info.name] = json.dumps({**info.__dict__, "registered_at": time.time()})
    if not mapping:
        return
    if len(mapping) > MAX_WORKERS:
        raise RegistryFull(mapping, len(mapping), MAX_WORKERS)
    args: list[Any] = [MAX_WORKERS]
    for name, entry in mapping.items():
        args += [name, entry]
    # The bound is checked and the entries written in one script: two processes registering at
    # once cannot both pass the check, and a refused call leaves nothing half-written.
    written, holds = lua.run(client, "registry_register", RegistryKeys(), args)
    if not written:
        raise RegistryFull(mapping, int(holds), MAX_WORKERS)


def parse(name: bytes | str, raw: bytes | str) -> WorkerInfo | BrokenEntry:
    """One entry of the hash, checked as ``register`` would have written it."""
    try:
        text_name = name.decode() if isinstance(name, bytes) else name
    except UnicodeDecodeError:
        return BrokenEntry(name.decode("utf-8", "replace"), "the worker name is not UTF-8 text")  # type: ignore[union-attr]
    try:
        return checked(_info(text_name, raw))
    except (TypeError, ValueError) as exc:
        return BrokenEntry(text_name, str(exc))


def _info(name: str, raw: bytes | str) -> WorkerInfo:
    if len(raw) > MAX_ENTRY_BYTES:
        raise ValueError(f"the entry is {len(raw)} bytes long; at most {MAX_ENTRY_BYTES}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the entry is not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"the entry must be a JSON object, got {json.dumps(data)[:100]}")
    if "queue_name" not in data:
        raise ValueError("the entry has no queue_name")
    if "shards_count" not in data:
        raise ValueError("the entry has no shards_count")
    return WorkerInfo(
        name=name,
        queue_name=data["queue_name"],
        shards_count=data["shards_count"],
        max_retry_count=data.get("max_retry_count", 25),
        batch_size=data.get("batch_size", 1),
        registered_at=_time(data.get("registered_at", 0.0)),
        # Absent from entries written before they were recorded: the defaults.
        time_limit=data.get("time_limit"),
        isolation=data.get("isolation", "thread"),
        morgue_policy=data.get("morgue_policy", "oldest_payload"),
    )


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"registered_at must be a unix time, got {value!r}")
    return float(value)


def read(client: Transport | redis.Redis) -> tuple[list[WorkerInfo], list[BrokenEntry]]:
    """Every entry, by name: the workers, and the entries that cannot be used.

    At most MAX_WORKERS entries, in one bounded script: when the hash holds more (written by
    something other than ``register``), the broken entries end with one named UNREAD that
    says how many were left out.
    """
    reply = lua.run(client, "registry_read", RegistryKeys(), (MAX_WORKERS, MAX_ENTRY_BYTES))
    size = int(reply[0])
    entries: list[tuple[bytes | str, WorkerInfo | BrokenEntry]] = []
    for i in range(1, len(reply), 4):
        name, name_size, raw, raw_size = reply[i : i + 4]
        entries.append((name, _entry(name, int(name_size), raw, int(raw_size))))
    workers: list[WorkerInfo] = []
    broken: list[BrokenEntry] = []
    for _, entry in sorted(entries, key=lambda pair: pair[0]):
        (workers if isinstance(entry, WorkerInfo) else broken).append(entry)  # type: ignore[arg-type]
    if size > len(entries):
        broken.append(BrokenEntry(UNREAD, f"the registry holds {size:,} entries, more than the {MAX_WORKERS:,} a "
                                          f"console reads (lowkiq.store.registry.MAX_WORKERS): {size - len(entries):,} "
                                          f"are not shown. register() refuses workers past the bound, so "
                                          f"something else wrote them: delete the entries that are not workers."))
    return workers, broken


def _entry(name: bytes | str, name_size: int, raw: bytes | str, raw_size: int) -> WorkerInfo | BrokenEntry:
    """One entry as registry_read returned it: a name or an entry too long to read came back cut or empty."""
    if name_size > len(name):
        shown = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
        return BrokenEntry(shown[:100] + "...", f"the worker name is {name_size:,} bytes long; at most "
                                               f"{MAX_ENTRY_BYTES:,} are read")
    if raw_size > len(raw):
        shown = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
        return BrokenEntry(shown, f"the entry is {raw_size} bytes long; at most {MAX_ENTRY_BYTES}")
    return parse(name, raw)


def known(client: Transport | redis.Redis) -> list[WorkerInfo]:
    """The workers whose entries are valid."""
    return read(client)[0]


def forget_unchanged(client: Transport | redis.Redis, name: str, raw: bytes | str) -> bool:
    """Forget ``name`` only if its entry is still ``raw`` (as read before deciding to); whether it was."""
    return bool(lua.run(client, "registry_forget", RegistryKeys(), (name, raw)))
