"""The operators' view of recurring schedules, shared by the console pages, the JSON API and the CLI.

Schedules come from the configured app, else from the registry servers keep in Redis
(``lowkiq.store.schedules``). Pausing, resuming and "run now" are audited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UnknownWorker
from ..jobs import PreparedJob
from ..serializers import dump_json, load_error, load_json
from ..store import audit, schedules
from ..store.keys import QueueKeys
from ..store.queue import Queue
from ..store.schedules import ScheduleInfo, ScheduleState


class UnknownSchedule(UnknownWorker):
    """No schedule of that name (a 404 in the console, exit 2 in the CLI)."""


@dataclass(frozen=True)
class ScheduleRow:
    info: ScheduleInfo
    state: ScheduleState
    next_at: float | None  # the next tick after now (None while paused: no tick is enqueued)

    def as_json(self) -> dict[str, Any]:
        i, s = self.info, self.state
        return {"name": i.name, "worker": i.worker, "cron": i.cron, "every": i.every, "timezone": i.timezone,
                "next_at": self.next_at, "last_at": s.last_at, "paused": s.paused, "rule": i.rule.words(),
                "id": i.id, "catch_up": i.catch_up, "last_outcome": s.outcome or None}


class ScheduleConsole:
    def __init__(self, client: Any, configured: Sequence[Any] = (),
                 dump_payload: Callable[[Any], bytes | str] = dump_json, *, registry_ttl: float = 0.0) -> None:
        """``registry_ttl``: seconds the registry's schedules are kept before being read again (0: every time),
        for a board polled often, such as the dashboard's."""
        self.client = client
        # the app's lowkiq.Schedule objects, when the console runs with the app's code
        self.configured = {s.name: s for s in configured}
        self.dump_payload = dump_payload
        self.registry_ttl = registry_ttl
        self._registry: tuple[float, list[ScheduleInfo]] | None = None

    def infos(self) -> list[ScheduleInfo]:
        if self.configured:
            return [schedules.info_of(s) for s in self.configured.values()]
        read_at = time.monotonic()
        if self._registry is None or read_at - self._registry[0] >= self.registry_ttl:
            self._registry = (read_at, schedules.read_registry(self.client))
        return self._registry[1]

    def now(self) -> float:
        seconds, micros = self.client.time()
        return int(seconds) + int(micros) / 1_000_000

    def rows(self, now: float | None = None) -> list[ScheduleRow]:
        """Every schedule with its state; ``now``: the moment its next tick is counted from (Redis's by default)."""
        infos = self.infos()
        if not infos:
            return []
        states = schedules.states(self.client, infos)
        now = self.now() if now is None else now
        return [ScheduleRow(info, state, None if state.paused else info.rule.next_after(now))
                for info, state in zip(infos, states)]

    def find(self, name: str) -> ScheduleInfo:
        for info in self.infos():
            if info.name == name:
                return info
        raise UnknownSchedule(name, f"no schedule named {name!r}")

    def pause(self, name: str, *, who: str, source: str) -> bool:
        return self._set(name, schedules.PAUSE, who=who, source=source)

    def resume(self, name: str, *, who: str, source: str) -> bool:
        return self._set(name, schedules.RESUME, who=who, source=source)

    def _set(self, name: str, verb: str, *, who: str, source: str) -> bool:
        info = self.find(name)
        changed = schedules.set_paused(self.client, info, verb, who=who, source=source)
        done = "paused" if verb == schedules.PAUSE else "resumed"
        audit.record(self.client, who=who, source=source, action=f"schedule/{verb}", worker=info.worker,
                     count=0, scope=f"schedule {name} {done}" if changed else f"schedule {name} was {done} already")
        return changed

    def run_now(self, name: str, *, who: str, source: str) -> float:
        """Enqueue the schedule's job now (also while paused): ``{"scheduled_at": <Redis now>}`` plus its
        payload; its mark is untouched, so the next tick comes as planned. Returns that now."""
        info = self.find(name)
        now = self.now()
        payload = self._payload(info, now)
        queue = Queue(self.client, QueueKeys(info.queue_name, info.shards_count), load_payload=load_json,
                      load_error=load_error)
        raw = self.dump_payload(payload)
        queue.push([PreparedJob(info.id, now, raw if isinstance(raw, bytes) else raw.encode(), now)])
        audit.record(self.client, who=who, source=source, action="schedule/run", worker=info.worker, count=1,
                     ids=[info.id], scope=f"schedule {name} run now (scheduled_at {now:.3f})")
        return now

    def _payload(self, info: ScheduleInfo, now: float) -> dict[str, Any]:
        configured = self.configured.get(info.name)
        if configured is not None:
            payload: dict[str, Any] = configured.payload_for(now)
            return payload
        return {"scheduled_at": now, **schedules.registered_payload(self.client, info.name)}


def from_app(client: Any, *, registry_ttl: float = 0.0) -> ScheduleConsole:
    """The schedules of the configured app in this process, else those of the registry."""
    from .. import runtime

    current = runtime._current
    if current is not None and current.settings.schedules:
        return ScheduleConsole(client, current.settings.schedules, current.settings.dump_payload)
    return ScheduleConsole(client, registry_ttl=registry_ttl)
