"""Dependencies across ids (``after``; docs/dependencies.md): a version that waits for other ids' versions.

Every script touches one shard's slot, so a dependency spans two steps and a delivery:
1. ``depend_watch`` in each dependency's shard records a watch on the versions it holds now (none: no wait);
2. ``depend_park`` in the dependent's shard keeps the version waiting on the watched dependencies (none
   watched: it is queued at once);
3. the dependency's acknowledgement (or an operator's delete) settles the watch in the same script and
   writes a release into that shard's stream; the holder of that shard's lease delivers it with
   ``depend_deliver`` into the dependent's shard (``deliver``, a keeper duty), at least once, idempotently.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

from ..jobs import PreparedJob
from ..transport import Transport
from . import codec, lua
from .keys import WAKE_CHANNEL, ShardKeys

if TYPE_CHECKING:
    from ..spec import WorkerSpec as Worker

# Releases read from one shard's stream per delivery round: a round's work stays bounded.
DELIVER_CHUNK = 100


def checked(worker: type[Worker], jobs: Sequence[PreparedJob],
            workers: Sequence[type[Worker]]) -> tuple[list[PreparedJob], list[PreparedJob]]:
    """The jobs without ``after`` and those with it, after checking every ``after`` entry names a configured
    worker and not the job itself: ValueError naming the job's index and ``after``, before anything is written."""
    if not any(job.after for job in jobs):
        return list(jobs), []
    known = _by_name(worker, workers)
    plain, dependent = [], []
    for index, job in enumerate(jobs):
        if not job.after:
            plain.append(job)
            continue
        for k, (name, dependency) in enumerate(job.after):
            if name not in known:
                raise ValueError(f"job {index}: after[{k}] names worker {name!r}, which is not configured "
                                 f"(known: {', '.join(sorted(known))})")
            if known[name] is worker and dependency == job.id:
                raise ValueError(f"job {index}: after[{k}] names the job's own id {job.id!r} of {name}: "
                                 f"a version cannot wait for itself")
        dependent.append(job)
    return plain, dependent


def _by_name(worker: type[Worker], workers: Sequence[type[Worker]]) -> dict[str, type[Worker]]:
    known = {w.__name__: w for w in workers}
    known[worker.__name__] = worker
    return known


def enqueue(client: Transport, worker: type[Worker], jobs: Sequence[PreparedJob],
            workers: Sequence[type[Worker]], *, history: str = "") -> int:
    """Writes jobs with ``after`` (already ``checked``): watches first, then each version waiting or queued.

    A job naming another job of the same call that waits itself is written after it, so that it waits for it.
    Returns how many distinct ids were written.
    """
    known = _by_name(worker, workers)
    for level in _levels(worker, jobs):
        waits = [uuid.uuid4().hex for _ in level]
        watches: list[lua.Call] = []
        owners: list[tuple[int, str, str]] = []
        for n, job in enumerate(level):
            keys = _keys_of(worker, job.id)
            for name, dependency in job.after:
                watches.append(("depend_watch", _keys_of(known[name], dependency),
                                (dependency, name, keys.queue_name, keys.shard, job.id, waits[n])))
                owners.append((n, name, dependency))
        watched: list[list[str]] = [[] for _ in level]
        for (n, name, dependency), reply in zip(owners, lua.run_many(client, watches)):
            if int(reply) == 1:
                watched[n] += (name, dependency)
        parks: list[lua.Call] = []
        for n, job in enumerate(level):
            keys = _keys_of(worker, job.id)
            parks.append(("depend_park", keys, (
                job.id, waits[n], "" if job.perform_in is None else repr(min(job.perform_in, codec.LATEST_SECONDS)), job.payload,
                "" if job.score is None else repr(job.score), job.group or "", WAKE_CHANNEL, keys.wake_message,
                history, msgpack.packb(list(job.tags)) if job.tags else "", *watched[n])))
        lua.run_many(client, parks)
    return len({job.id for job in jobs})


def _levels(worker: type[Worker], jobs: Sequence[PreparedJob]) -> list[list[PreparedJob]]:
    """The jobs in order, cut where one names a dependent job of the same level (written before it)."""
    levels: list[list[PreparedJob]] = [[]]
    here: set[tuple[str, str]] = set()
    for job in jobs:
        if any(pair in here for pair in job.after):
            levels.append([])
            here = set()
        levels[-1].append(job)
        here.add((worker.__name__, job.id))
    return levels


def _keys_of(worker: type[Worker], job_id: str) -> ShardKeys:
    return ShardKeys(worker.queue_name, codec.shard_of(job_id, worker.shards_count))


@dataclass(frozen=True)
class Release:
    """A settled watch read from a dependency's shard, to deliver into its dependent's shard."""

    source: ShardKeys
    entry_id: bytes
    target: ShardKeys
    id: str
    wait: str
    worker: str  # the dependency's worker name and id, as the dependent's ``after`` named them
    dependency: str


def pending_releases(client: Transport, shards: Sequence[ShardKeys]) -> list[Release]:
    """Up to DELIVER_CHUNK releases of each shard, oldest first: one round trip for all of them."""
    if not shards:
        return []
    replies = client.pipeline_commands(
        [(keys.depend_releases_stream, ("XRANGE", keys.depend_releases_stream, "-", "+", "COUNT", DELIVER_CHUNK))
         for keys in shards])
    releases = []
    for keys, entries in zip(shards, replies):
        for entry_id, flat in entries:
            fields = _fields(flat)
            releases.append(Release(keys, entry_id, ShardKeys(fields["q"], int(fields["s"])), fields["i"],
                                    fields["w"], fields["dw"], fields["di"]))
    return releases


def _fields(flat: Any) -> dict[str, str]:
    if isinstance(flat, dict):
        return {codec.text(k): codec.text(v) for k, v in flat.items()}
    return {codec.text(flat[i]): codec.text(flat[i + 1]) for i in range(0, len(flat), 2)}


def deliver(client: Transport, releases: Sequence[Release]) -> int:
    """Delivers releases into their dependents' shards, then removes the delivered ones from their streams.

    A crash between the two delivers them again: ``depend_deliver`` finds nothing the second time.
    Returns how many were delivered.
    """
    if not releases:
        return 0
    calls: list[lua.Call] = [("depend_deliver", r.target, (r.id, r.wait, r.worker, r.dependency, WAKE_CHANNEL,
                                                           r.target.wake_message)) for r in releases]
    replies = lua.run_many(client, calls, settle=True)
    # an audit's releases (``orphaned``) are in no stream: nothing to remove
    done = [r for r, reply in zip(releases, replies) if not isinstance(reply, BaseException) and r.entry_id]
    by_source: dict[ShardKeys, list[bytes]] = {}
    for r in done:
        by_source.setdefault(r.source, []).append(r.entry_id)
    if by_source:
        client.pipeline_commands([(keys.depend_releases_stream, ("XDEL", keys.depend_releases_stream, *ids))
                                  for keys, ids in by_source.items()])
    failed = [reply for reply in replies if isinstance(reply, BaseException)]
    if failed:
        raise failed[0]
    return len(replies) - len(failed)


@dataclass(frozen=True)
class Waiting:
    """A version of an id waiting for its dependencies: its payload, score, when it came, and on what it waits
    (worker name, id), in the order ``after`` named them."""

    wait: str
    payload: bytes
    score: float
    since: float
    perform_in: float
    group: str | None
    on: list[tuple[str, str]]


def waiting_of(client: Transport, keys: ShardKeys, job_id: str) -> list[Waiting]:
    """The versions of ``job_id`` waiting in its shard (one HGET, bounded by the scripts' cap)."""
    raw = client.pipeline_commands([(keys.depend_waiting_hash, ("HGET", keys.depend_waiting_hash, job_id))])[0]
    if raw is None:
        return []
    out = []
    for parking in msgpack.unpackb(raw, raw=True):
        wait, perform_in, payload, score, group, pending, since = parking[:7]  # [7]: its tags, for the queue
        pairs = [(codec.text(pending[i]), codec.text(pending[i + 1])) for i in range(0, len(pending), 2)]
        out.append(Waiting(codec.text(wait), bytes(payload), float(score), float(since), float(perform_in),
                           codec.text(group) or None, pairs))
    return out


def waiting_counts(client: Transport, shards: Sequence[ShardKeys]) -> list[int]:
    """Each shard's ids with a version waiting for dependencies: one HLEN each, one round trip."""
    if not shards:
        return []
    return [int(n) for n in client.pipeline_commands(
        [(keys.depend_waiting_hash, ("HLEN", keys.depend_waiting_hash)) for keys in shards])]


def states(client: Transport, dependencies: Sequence[tuple[ShardKeys, str]]) -> list[str]:
    """Where each dependency's id is now, the first that holds of: "dead" (in the morgue: what an operator must
    see first), "processing", "queued", "waiting" (on its own dependencies), else "gone"; one round trip."""
    commands: list[tuple[str, Sequence[Any]]] = []
    for keys, job_id in dependencies:
        commands += [(keys.morgue_payloads_hash, ("HEXISTS", keys.morgue_payloads_hash, job_id)),
                     (keys.processing_hash, ("HEXISTS", keys.processing_hash, job_id)),
                     (keys.payloads_hash, ("HEXISTS", keys.payloads_hash, job_id)),
                     (keys.depend_waiting_hash, ("HEXISTS", keys.depend_waiting_hash, job_id))]
    replies = client.pipeline_commands(commands) if commands else []
    names = ("dead", "processing", "queued", "waiting")
    out = []
    for i in range(len(dependencies)):
        found = [name for name, flag in zip(names, replies[4 * i: 4 * i + 4]) if int(flag)]
        out.append(found[0] if found else "gone")
    return out


# A version waiting longer than this is checked against its dependencies' watches (``orphaned``).
AUDIT_AFTER = 60.0
# Ids of one shard's waiting versions an audit step reads at most.
AUDIT_CHUNK = 50


def orphaned(client: Transport, keys: ShardKeys, workers: Mapping[str, type[Worker]], now: float,
             cursor: int = 0) -> tuple[list[Release], int]:
    """One step through a shard's waiting versions: the releases of those that have waited AUDIT_AFTER seconds
    on a dependency whose shard keeps no watch for them, and the cursor of the next step (0: a round ended).

    A version is parked only after its watches were written, and a watch leaves only with its release; so a
    missing watch was settled (its release is on its way, and delivering it again is harmless) or lost with
    the last writes of a failed-over primary (and nothing else would ever release the version).
    """
    next_cursor, flat = client.pipeline_commands(
        [(keys.depend_waiting_hash, ("HSCAN", keys.depend_waiting_hash, cursor, "COUNT", AUDIT_CHUNK))])[0]
    suspects: list[tuple[str, str, str, str, ShardKeys]] = []  # id, wait, worker, dependency, its shard
    for i in range(0, len(flat), 2):
        job_id = codec.text(flat[i])
        for parking in msgpack.unpackb(flat[i + 1], raw=True):
            wait, pending, since = codec.text(parking[0]), parking[5], float(parking[6])
            if now - since < AUDIT_AFTER:
                continue
            for k in range(0, len(pending), 2):
                name, dependency = codec.text(pending[k]), codec.text(pending[k + 1])
                worker = workers.get(name)
                if worker is not None:
                    suspects.append((job_id, wait, name, dependency, _keys_of(worker, dependency)))
    if not suspects:
        return [], int(next_cursor)
    records = client.pipeline_commands([(where.depend_watches_hash, ("HGET", where.depend_watches_hash, dependency))
                                        for _, _, _, dependency, where in suspects])
    releases = []
    for (job_id, wait, name, dependency, where), record in zip(suspects, records):
        waits = {codec.text(w[5]) for w in msgpack.unpackb(record, raw=True)[1:]} if record is not None else set()
        if wait not in waits:
            releases.append(Release(where, b"", keys, job_id, wait, name, dependency))
    return releases, int(next_cursor)


def watchers_of(client: Transport, keys: ShardKeys, job_id: str) -> list[tuple[str, str]]:
    """(queue name, id) of each version waiting for ``job_id``'s versions, as its watches name them (one HGET,
    bounded by the scripts' cap)."""
    raw = client.pipeline_commands([(keys.depend_watches_hash, ("HGET", keys.depend_watches_hash, job_id))])[0]
    if raw is None:
        return []
    return [(codec.text(w[2]), codec.text(w[4])) for w in msgpack.unpackb(raw, raw=True)[1:]]


def sample_waiting(client: Transport, shards: Sequence[ShardKeys],
                   count: int) -> list[list[tuple[str, list[tuple[str, str]]]]]:
    """Per shard, some of its waiting ids and what each waits on (worker name, id), from one HSCAN step of about
    ``count`` ids, all shards in one round trip: the dashboard's look for versions held by a dead dependency,
    bounded whatever the number waiting."""
    if not shards:
        return []
    replies = client.pipeline_commands(
        [(keys.depend_waiting_hash, ("HSCAN", keys.depend_waiting_hash, 0, "COUNT", count)) for keys in shards])
    out = []
    for _, flat in replies:
        found = []
        for i in range(0, len(flat), 2):
            pending = [pair for parking in msgpack.unpackb(flat[i + 1], raw=True)
                       for pair in zip(parking[5][0::2], parking[5][1::2])]
            found.append((codec.text(flat[i]), [(codec.text(w), codec.text(d)) for w, d in pending]))
        out.append(found)
    return out
