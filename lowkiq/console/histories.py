"""Each id's history as the console, the API and the CLI show it (docs/history.md): its events with the servers
named as people know them (host and pid, while the server lives), and an id found by its history in every worker
when it is no longer queued, busy or dead."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..store import membership
from ..store.id_history import History, IdHistories

if TYPE_CHECKING:
    from . import Console, WorkerView

# Events a job page or a reply shows at most; older ones are said to exist.
LIMIT = 200
# A search through every worker's history examines at most this many entries per worker.
SEARCH_EXAMINED = 20_000


@dataclass
class Shown:
    """A worker's history of one id, and how to name its servers: member id -> "host pid N"."""

    view: WorkerView
    history: History
    servers: dict[str, str] = field(default_factory=dict)

    def server_name(self, member_id: str | None) -> str:
        if not member_id:
            return ""
        return self.servers.get(member_id, member_id[:8])

    def as_json(self) -> dict[str, Any]:
        h = self.history
        events = []
        for event in h.events:
            row = event.as_json()
            row["server_name"] = self.server_name(event.server) or None
            events.append(row)
        return {"worker": self.view.name, "id": h.id, "shard": h.shard, "events": events, "examined": h.examined,
                "complete": h.complete, "reaches_back_to": h.reaches_back_to}


def servers(console: Console) -> dict[str, str]:
    """The live servers, by member id: their host and pid."""
    return {m.id: f"{m.host} pid {m.pid}" for m in membership.live(console.client)}


def of(console: Console, view: WorkerView, job_id: str, *, limit: int = LIMIT) -> Shown:
    return Shown(view, _histories(console, view).of(job_id, limit=limit), servers(console))


def search(console: Console, job_id: str, *, limit: int = LIMIT, views: list[WorkerView] | None = None) -> list[Shown]:
    """The workers whose history holds ``job_id``, each with its events (a bounded walk per worker)."""
    return search_within(console, job_id, console.workers() if views is None else views, limit=limit)[0]


def search_within(console: Console, job_id: str, views: list[WorkerView], *, limit: int = LIMIT,
                  entries: int | None = None) -> tuple[list[Shown], int]:
    """``search`` through ``views`` in their order, walking ``entries`` history entries at most in all (None:
    no bound but each worker's): the workers whose history holds the id, and how many of ``views`` were walked.
    A worker is walked only while a whole walk (SEARCH_EXAMINED) fits in what is left."""
    names = servers(console)
    found: list[Shown] = []
    left = entries
    for walked, view in enumerate(views):
        if left is not None and left < SEARCH_EXAMINED:
            return found, walked
        history = _histories(console, view).of(job_id, limit=limit, max_examined=SEARCH_EXAMINED)
        if left is not None:
            left -= history.examined
        if history.events:
            found.append(Shown(view, history, names))
    return found, len(views)


def _histories(console: Console, view: WorkerView) -> IdHistories:
    return IdHistories(console.client, view.keys, load_error=console.load_error)
