"""Every Redis key lowkiq uses is named here, and only here.

Keys of one (queue, shard) share the hash tag ``{queue:shard}`` so that a
Redis Cluster keeps each shard in one slot: every script touches one shard.
The Redis type is part of each name so a reader knows what to call on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

PREFIX = "lowkiq:v1"
# Pub/Sub channel on which a push says a shard has work due sooner than its server would look
# (message: "<queue_name>:<shard>"); see lowkiq.server.waker.
WAKE_CHANNEL = f"{PREFIX}:wake"
FORBIDDEN_IN_QUEUE_NAME = "{}"
# Letters, digits and "_" of any script, then also ".", ":" and "-": a name that is one URL path
# segment as it is, and never a Redis Cluster hash tag ({}).
NAME_PATTERN = re.compile(r"\w[\w.:-]*")
MAX_NAME_LENGTH = 200


def validate_queue_name(name: str, what: str = "queue_name") -> str:
    """``name`` if it may name a queue (or, with ``what``, a worker), else ValueError saying why.

    The console puts names in URL paths: "/", "..", "?", "#", "%", whitespace and
    control characters would make a link lead somewhere else.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}")
    bad = [c for c in FORBIDDEN_IN_QUEUE_NAME if c in name]
    if bad:
        raise ValueError(f"{what} {name!r} must not contain {''.join(bad)!r} (they delimit Redis Cluster hash tags)")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"{what} {name[:40]!r}... is {len(name)} characters long; at most {MAX_NAME_LENGTH}")
    if not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise ValueError(f"{what} {name!r} may hold only letters, digits, '_', '.', ':' and '-', start with a letter, "
                         f"digit or '_', and not contain '..' (the console puts it in URLs)")
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
        """Queued ids that never failed (retry_count -1), all scored 0: sorting and filtering by id."""
        return f"{self.tag}:ids_lex"

    @property
    def retried_ids_lex_zset(self) -> str:
        """Queued ids that failed at least once, all scored 0: with ``ids_lex``, every queued id by id."""
        return f"{self.tag}:retried_ids_lex"

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

    @property
    def lease_hash(self) -> str:
        """Who may change this shard's processing area: state (held/released), owner (a member id),
        grant, epoch, cfg_epoch, expires_ms and acquired_ms in Redis server time, and what the
        owner is doing (thread, taken_ms)."""
        return f"{self.tag}:lease"

    @property
    def crashes_hash(self) -> str:
        """id -> how many times the job's batch was restored after its owner died performing it."""
        return f"{self.tag}:crashes"

    # -- fairness (docs/fairness.md): only shards that hold grouped ids have these keys --

    @property
    def group_of_hash(self) -> str:
        """id -> its group, for grouped ids queued or in processing (the default group has no entry)."""
        return f"{self.tag}:group_of"

    @property
    def grouped_ids_by_perform_in_zset(self) -> str:
        """The grouped ids of ``ids_by_perform_in``, with the same scores: what the default group is not."""
        return f"{self.tag}:grouped_ids_by_perform_in"

    @property
    def grouped_ids_lex_zset(self) -> str:
        """Grouped ids, all scored 0, as "<group length (2 bytes)><group><sortable perform_in (8 bytes)><id>":
        one group's ids oldest due first in one ZRANGEBYLEX."""
        return f"{self.tag}:grouped_ids_lex"

    @property
    def groups_zset(self) -> str:
        """group ("" = the default group) -> max(its oldest perform_in, its last turn): the take serves the
        lowest due score, so a group just served goes behind every group waiting (round robin)."""
        return f"{self.tag}:groups"

    @property
    def group_turns_hash(self) -> str:
        """group -> when the take last served it (Redis seconds, strictly increasing per shard);
        field "\0last": the shard's latest turn."""
        return f"{self.tag}:group_turns"

    @property
    def group_lengths_zset(self) -> str:
        """group -> how many ids it has queued in this shard (never 0: a group with none leaves): the depth per
        group that the console shows, its biggest groups in one ZREVRANGE."""
        return f"{self.tag}:group_lengths"

    @property
    def paused_groups_hash(self) -> str:
        """group -> "<ms of Redis time> <JSON: who, source>" while an operator holds it (docs/fairness.md, "Pausing
        a group"): a paused group stays out of ``groups``, so the take never reaches its ids."""
        return f"{self.tag}:paused_groups"

    @property
    def first_enqueued_hash(self) -> str:
        """id -> Redis time its oldest queued payload was enqueued: debounce's upper bound (debounce_max)."""
        return f"{self.tag}:first_enqueued"

    # -- ids that hold many payloads keep them here, so that one more costs the same (_spill.lua) --

    @property
    def spilled_payloads_zset(self) -> str:
        """``id NUL sortable(score) payload``, all scored 0: each spilled id's payloads by id, in score order."""
        return f"{self.tag}:spilled_payloads"

    @property
    def spilled_scores_hash(self) -> str:
        """``id NUL payload`` -> its score: a spilled id's payloads found by content (an equal one merges)."""
        return f"{self.tag}:spilled_scores"

    @property
    def events_stream(self) -> str:
        """Each id's history (docs/history.md): one entry per script call that moved ids of this shard, ``k`` its
        kind and ``d`` its msgpack detail (lowkiq.store.id_history), the newest ``history_length`` kept."""
        return f"{self.tag}:events"

    # -- dependencies (docs/dependencies.md): only shards whose ids are waited for, or wait, have these keys --

    @property
    def depend_watches_hash(self) -> str:
        """id -> msgpack {acknowledgements counted, watch, ...}: the dependents waiting for this shard's id."""
        return f"{self.tag}:depend_watches"

    @property
    def depend_releases_stream(self) -> str:
        """Settled watches to deliver into their dependents' shards (fields q, s, i, w, dw, di), at least once."""
        return f"{self.tag}:depend_releases"

    @property
    def depend_waiting_hash(self) -> str:
        """id -> msgpack {parking, ...}: this shard's versions waiting for their dependencies (``after``)."""
        return f"{self.tag}:depend_waiting"

    @property
    def depend_early_zset(self) -> str:
        """"wait NUL worker NUL id" -> when: releases that came before their version was parked."""
        return f"{self.tag}:depend_early"

    # -- tags (docs/tags.md): only shards that hold tagged ids have these keys --

    @property
    def tags_of_hash(self) -> str:
        """id -> msgpack array of its tags, for tagged ids queued, in processing or in the morgue."""
        return f"{self.tag}:tags_of"

    @property
    def tagged_ids_lex_zset(self) -> str:
        """``tag NUL id`` for each tag of each id of ``tags_of``, all scored 0: one tag's ids by id in one
        ZRANGEBYLEX (a tag is printable, so it holds no NUL)."""
        return f"{self.tag}:tagged_ids_lex"

    @property
    def wake_message(self) -> str:
        return f"{self.queue_name}:{self.shard}"

    def all(self) -> list[str]:
        """The KEYS list every script receives, in the order of ``SCRIPT_KEYS``."""
        return [getattr(self, attribute) for _, attribute in SCRIPT_KEYS]


# The one definition of the scripts' KEYS: (the Lua local each script knows the key as,
# the ShardKeys attribute naming it). ``lua_prelude()`` writes the Lua side from it.
SCRIPT_KEYS: tuple[tuple[str, str], ...] = (
    ("K_READY", "ids_by_perform_in_zset"),
    ("K_LEX", "ids_lex_zset"),
    ("K_RETRIES", "ids_by_retry_count_zset"),
    ("K_PAYLOADS", "payloads_hash"),
    ("K_ERRORS", "errors_hash"),
    ("K_PROCESSING", "processing_hash"),
    ("K_M_LEX", "morgue_ids_lex_zset"),
    ("K_M_UPDATED", "morgue_ids_by_updated_at_zset"),
    ("K_M_PAYLOADS", "morgue_payloads_hash"),
    ("K_M_ERRORS", "morgue_errors_hash"),
    ("K_COUNTERS", "counters_hash"),
    ("K_LEASE", "lease_hash"),
    ("K_CRASHES", "crashes_hash"),
    ("K_RLEX", "retried_ids_lex_zset"),
    ("K_GROUP_OF", "group_of_hash"),
    ("K_GREADY", "grouped_ids_by_perform_in_zset"),
    ("K_GLEX", "grouped_ids_lex_zset"),
    ("K_GROUPS", "groups_zset"),
    ("K_GTURNS", "group_turns_hash"),
    ("K_FIRST", "first_enqueued_hash"),
    ("K_GLENGTHS", "group_lengths_zset"),
    ("K_SPILL", "spilled_payloads_zset"),
    ("K_SPILL_SCORES", "spilled_scores_hash"),
    ("K_EVENTS", "events_stream"),
    ("K_DEP_WATCH", "depend_watches_hash"),
    ("K_DEP_OUTBOX", "depend_releases_stream"),
    ("K_DEP_PARKED", "depend_waiting_hash"),
    ("K_DEP_EARLY", "depend_early_zset"),
    ("K_TAGS_OF", "tags_of_hash"),
    ("K_TAGGED", "tagged_ids_lex_zset"),
    ("K_GPAUSED", "paused_groups_hash"),
)


def lua_prelude() -> str:
    """The first lines of every script: a Lua local per key of ``SCRIPT_KEYS``, bound to its KEYS slot."""
    return "\n".join(f"local {name} = KEYS[{n}]" for n, (name, _) in enumerate(SCRIPT_KEYS, start=1)) + "\n"


@dataclass(frozen=True)
class QueueKeys:
    queue_name: str
    shards_count: int

    def __post_init__(self) -> None:
        validate_queue_name(self.queue_name)
        if not isinstance(self.shards_count, int) or isinstance(self.shards_count, bool) or self.shards_count < 1:
            raise ValueError(f"shards_count must be a positive int, got {self.shards_count!r}")

    def shard(self, shard: int) -> ShardKeys:
        if 0 <= shard < self.shards_count:
            return _shard_keys(self.queue_name, self.shards_count)[shard]
        return ShardKeys(self.queue_name, shard)

    def shards(self) -> list[ShardKeys]:
        return list(_shard_keys(self.queue_name, self.shards_count))


@lru_cache(maxsize=256)
def _shard_keys(queue_name: str, shards_count: int) -> tuple[ShardKeys, ...]:
    """Every shard's keys, built once per queue: a producer's Queue, made per call, would otherwise build
    a ShardKeys per shard on every enqueue (500 shards: about 0.25 ms of each one-job call)."""
    return tuple(ShardKeys(queue_name, s) for s in range(shards_count))


@dataclass(frozen=True)
class MemberKeys:
    """The server processes alive now: one hash slot (tag ``{lowkiq}``) for all of them."""

    @property
    def members_zset(self) -> str:
        """member id -> heartbeat expiry, ms of Redis server time."""
        return f"{PREFIX}:{{lowkiq}}:members"

    @property
    def member_info_hash(self) -> str:
        """member id -> JSON: host, pid, threads, version, started_ms, state, workers, shards."""
        return f"{PREFIX}:{{lowkiq}}:member_info"

    @property
    def paused_hash(self) -> str:
        """Queue names no server may take jobs from: read by every beat (see PauseKeys)."""
        return PauseKeys().paused_hash

    def all(self) -> list[str]:
        """The KEYS list the membership scripts receive."""
        return [self.members_zset, self.member_info_hash, self.paused_hash]


@dataclass(frozen=True)
class LayoutKeys:
    """How many shards each queue is split into, as every producer and server must agree: one hash slot."""

    @property
    def layouts_hash(self) -> str:
        """queue name -> shards_count, set by the first producer or server of the queue."""
        return f"{PREFIX}:{{lowkiq}}:layouts"

    def all(self) -> list[str]:
        """The KEYS list the layout script receives."""
        return [self.layouts_hash]


@dataclass(frozen=True)
class AuditKeys:
    """Operators' actions, newest first, capped: one list in the {lowkiq} slot."""

    @property
    def audit_list(self) -> str:
        """Entries "<ms> <JSON>": who did what to which jobs, from the console, the API or the CLI."""
        return f"{PREFIX}:{{lowkiq}}:audit"

    def all(self) -> list[str]:
        return [self.audit_list]


@dataclass(frozen=True)
class ConfirmKeys:
    """One bulk action's confirmation, all in its own slot: what it confirms, the ids its dry run
    counted, and a mark that it was used (to tell a reused token from an unknown one)."""

    token: str

    @property
    def tag(self) -> str:
        return f"{PREFIX}:{{confirm:{self.token}}}"

    @property
    def scope_hash(self) -> str:
        """field -> value: worker, area, action, filter and the count the operator was shown."""
        return f"{self.tag}:scope"

    @property
    def ids_list(self) -> str:
        """The counted ids, a JSON array of up to a chunk's ids per item, in the filter's order."""
        return f"{self.tag}:ids"

    @property
    def used_string(self) -> str:
        return f"{self.tag}:used"

    def all(self) -> list[str]:
        return [self.scope_hash, self.ids_list, self.used_string]


@dataclass(frozen=True)
class PauseKeys:
    """Paused queues and the audit log: a pause and its audit entry are one script in the {lowkiq} slot."""

    @property
    def paused_hash(self) -> str:
        """queue name -> "<ms of Redis time> <JSON: who, source>", for as long as the queue is paused."""
        return f"{PREFIX}:{{lowkiq}}:paused"

    def all(self) -> list[str]:
        return [self.paused_hash, AuditKeys().audit_list]


@dataclass(frozen=True)
class ScheduleShardKeys:
    """A recurring schedule's state, in the slot of the shard its jobs land in: a tick's high-water mark moves
    in the same script that pushes the tick's job, so "each tick once" holds on a Redis Cluster too.

    ``all()`` is the shard's KEYS (``SCRIPT_KEYS``' order) then the schedules hash, so the tick script runs
    the push script's body on the shard's keys; its own key is always the last one.
    """

    queue_name: str
    shard: int

    @property
    def shard_keys(self) -> ShardKeys:
        return ShardKeys(self.queue_name, self.shard)

    @property
    def schedules_hash(self) -> str:
        """Per schedule name ``n``: ``tick:n`` the latest tick dealt with (enqueued or skipped by catch_up),
        ``last:n`` the latest tick enqueued, ``paused:n`` "<ms> <JSON who>" while paused, ``resumed:n`` when
        it was last resumed (unix seconds, Redis time); all times Redis time."""
        return f"{self.shard_keys.tag}:schedules"

    def all(self) -> list[str]:
        return [*self.shard_keys.all(), self.schedules_hash]


@dataclass(frozen=True)
class ScheduleStateKeys:
    """The schedules hash alone: pausing and resuming a schedule."""

    queue_name: str
    shard: int

    def all(self) -> list[str]:
        return [ScheduleShardKeys(self.queue_name, self.shard).schedules_hash]


def schedule_registry_hash() -> str:
    """Schedule name -> JSON definition (worker, rule, zone, id): the standalone console's list of schedules."""
    return f"{PREFIX}:{{lowkiq}}:schedules"


@dataclass(frozen=True)
class GroupKeys:
    """One group's limits (docs/fairness.md, "Group limits"), in the group's own hash slot: a group's ids live in
    many shards, so its permits and its starts cannot live in any one of them."""

    queue_name: str
    group: str

    @property
    def tag(self) -> str:
        # A "}" inside the group only shortens the tag: both keys keep the same one, hence one slot.
        return f"{PREFIX}:{{group:{self.queue_name}:{self.group}}}"

    @property
    def permits_zset(self) -> str:
        """"<queue>:<shard>:<grant>:<id>" of each id performing now -> when the permit ends (ms of Redis time):
        its holder's lease expiry, moved on with every renewal of that lease (group_concurrency)."""
        return f"{self.tag}:permits"

    @property
    def starts_zset(self) -> str:
        """The group's starts within the last period -> when (ms of Redis time); at most ``count`` of them
        (group_rate_limit)."""
        return f"{self.tag}:starts"

    def all(self) -> list[str]:
        return [self.permits_zset, self.starts_zset]


def day_stats_hash(worker: str, day: str) -> str:
    """A worker's wait and run times of one UTC day (``YYYY-MM-DD``), as counts, sums and fixed buckets
    (lowkiq.store.day_stats): written by plain HINCRBYs, one key per worker and day, expiring 30 days after it."""
    return f"{PREFIX}:{{stats:{worker}}}:{day}"


def registry_hash() -> str:
    """Worker name -> JSON {queue_name, shards_count}: lets the console find queues without app code."""
    return f"{PREFIX}:registry"


@dataclass(frozen=True)
class RegistryKeys:
    """The registry of workers, for the script that forgets one."""

    def all(self) -> list[str]:
        return [registry_hash()]


def webui_secret_string() -> str:
    """A random key the console signs CSRF tokens with when none is configured,
    shared by every console process (several gunicorn workers) through Redis."""
    return f"{PREFIX}:webui:secret"
