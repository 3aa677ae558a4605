"""What an id's versions wait for (``after``, docs/dependencies.md), as the console shows it: each waiting version
and where each dependency's id is now, so that an operator sees one held by a dead job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import UnknownWorker
from ..jobs import UndecodablePayload
from ..store import codec, dependencies
from ..store.keys import QueueKeys
from ..transport import Transport


# What these reads use of the console and of its view of a worker. The Console class imports this module for
# its methods, so naming it here would close an import cycle.
class WorkerView(Protocol):
    @property
    def keys(self) -> QueueKeys: ...


class Console(Protocol):
    @property
    def client(self) -> Transport: ...

    def worker(self, name: str) -> Any: ...

    def workers(self) -> Sequence[Any]: ...

    def load_payload(self, raw: bytes) -> Any: ...


@dataclass(frozen=True)
class WaitingOn:
    """A dependency: its worker, its id, and where that id is now ("dead", "processing", "queued", "waiting",
    "gone": released soon; "unknown": a worker this console does not know)."""

    worker: str
    id: str
    state: str

    def as_json(self) -> dict[str, str]:
        return {"worker": self.worker, "id": self.id, "state": self.state}


@dataclass(frozen=True)
class WaitingVersion:
    """A version of an id waiting for its dependencies, with what it waits on still."""

    payload: Any
    score: float
    since: float
    perform_in: float
    on: list[WaitingOn]


def waiting_versions(console: Console, view: WorkerView, job_id: str) -> list[WaitingVersion]:
    """Two round trips: the id's waiting versions, then where their dependencies are."""
    keys = view.keys.shard(codec.shard_of(job_id, view.keys.shards_count))
    versions = dependencies.waiting_of(console.client, keys, job_id)
    asked: list[tuple[int, int]] = []
    places = []
    for v, version in enumerate(versions):
        for d, (worker, dependency) in enumerate(version.on):
            try:
                known = console.worker(worker).keys
            except UnknownWorker:
                continue
            asked.append((v, d))
            places.append((known.shard(codec.shard_of(dependency, known.shards_count)), dependency))
    states = dict(zip(asked, dependencies.states(console.client, places)))
    return [WaitingVersion(_payload(console, version.payload), version.score, version.since, version.perform_in,
                           [WaitingOn(worker, dependency, states.get((v, d), "unknown"))
                            for d, (worker, dependency) in enumerate(version.on)])
            for v, version in enumerate(versions)]


@dataclass(frozen=True)
class Dependent:
    """A version of another id waiting for this one: its worker (its queue's name when this console does not know
    the worker) and id."""

    worker: str
    id: str

    def as_json(self) -> dict[str, str]:
        return {"worker": self.worker, "id": self.id}


def dependents(console: Console, view: WorkerView, job_id: str) -> list[Dependent]:
    """The versions waiting for the id's versions queued, in processing or dead (one read)."""
    keys = view.keys.shard(codec.shard_of(job_id, view.keys.shards_count))
    names = {w.info.queue_name: w.name for w in console.workers()}
    return [Dependent(names.get(queue, queue), dependent)
            for queue, dependent in dependencies.watchers_of(console.client, keys, job_id)]


def waiting_count(console: Console, view: WorkerView) -> int:
    """The worker's ids with a version waiting for dependencies: one read per shard, one round trip."""
    return sum(dependencies.waiting_counts(console.client, view.keys.shards()))


def _payload(console: Console, raw: bytes) -> Any:
    try:
        return console.load_payload(raw)
    except Exception as exc:  # a custom loader, or bytes another writer stored: shown, never fatal to a page
        return UndecodablePayload(raw, f"{type(exc).__name__}: {exc}")
