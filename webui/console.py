"""What the console reads and acts on: one Redis client, the known workers, the serializers.

A console finds its workers in one of two ways:

- from a configured lowkiq (``lowkiq.configure(workers=[...])`` in the host
  app, or in the file named by ``LOWKIQ_APP``): the workers' classes are the
  truth, and their payload serializers are used;
- from the registry that servers and clients keep in Redis, when no app code
  is at hand (the standalone console): payloads are read as JSON, the default.
"""

from __future__ import annotations

import runpy
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import redis

from .. import connection, registry
from ..config import redis_url_from
from ..queue.actions import Actions
from ..queue.keys import QueueKeys
from ..queue.metrics import QueueMetrics
from ..queue.queries import Queries
from ..registry import WorkerInfo
from ..runtime import Runtime
from ..serializers import load_error as default_load_error
from ..serializers import load_json
from ..queue.metrics import FULL, STATS, MetricsReader

# Registry lookups are cached this long: the stats API is polled often and the
# set of workers changes only on deploys.
REGISTRY_TTL = 5.0
CONSOLE_POOL_SIZE = 10
CONSOLE_POOL_TIMEOUT = 5.0


class UnknownWorker(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown worker {name!r}")
        self.name = name


@dataclass(frozen=True)
class WorkerView:
    """A worker as the console knows it, with its keys built once."""

    info: WorkerInfo
    keys: QueueKeys

    @property
    def name(self) -> str:
        return self.info.name


class Console:
    def __init__(
        self,
        client: redis.Redis,
        workers: Callable[[], list[WorkerInfo]],
        *,
        load_payload: Callable[[bytes], Any] = load_json,
        load_error: Callable[[bytes], str] = default_load_error,
        clock: Callable[[], float] = time.time,
        source: str = "registry",
    ) -> None:
        self.client = client
        self._workers = workers
        self.load_payload = load_payload
        self.load_error = load_error
        self.clock = clock
        self.source = source
        self._reader = MetricsReader(client)

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> "Console":
        """The console of a configured lowkiq; the registry only if it has no workers."""
        configured = [registry.info_of(w) for w in runtime.settings.workers]
        client = runtime.client
        workers = (lambda: configured) if configured else cached_registry(client)
        s = runtime.settings
        return cls(
            client,
            workers,
            load_payload=s.load_payload,
            load_error=s.load_error,
            clock=runtime.clock,
            source="app" if configured else "registry",
        )

    @classmethod
    def from_url(cls, url: str) -> "Console":
        client = connection.client(url, pool_size=CONSOLE_POOL_SIZE, timeout=CONSOLE_POOL_TIMEOUT)
        return cls(client, cached_registry(client))

    # ---- workers --------------------------------------------------------

    def workers(self) -> list[WorkerView]:
        return [WorkerView(info, QueueKeys(info.queue_name, info.shards_count)) for info in self._workers()]

    def worker(self, name: str) -> WorkerView:
        for view in self.workers():
            if view.name == name:
                return view
        raise UnknownWorker(name)

    def queries(self, view: WorkerView) -> Queries:
        return Queries(self.client, view.keys, load_payload=self.load_payload, load_error=self.load_error)

    def actions(self, view: WorkerView) -> Actions:
        return Actions(self.client, view.keys, clock=self.clock)

    # ---- numbers --------------------------------------------------------

    def metrics(self, views: list[WorkerView] | None = None, *, full: bool = True) -> list[tuple[WorkerView, QueueMetrics]]:
        """Every shard of the given workers (all by default) in one round trip.

        ``full=False`` reads only what api/v1/stats shows (length, dead, lag).
        """
        views = self.workers() if views is None else views
        measured, _ = self._reader.read([v.keys for v in views], self.clock(), kind=FULL if full else STATS)
        return list(zip(views, measured))

    def dashboard(self) -> tuple[list[tuple[WorkerView, QueueMetrics]], dict[str, Any]]:
        """Every shard's numbers and Redis INFO, in one round trip."""
        views = self.workers()
        measured, info = self._reader.read([v.keys for v in views], self.clock(), kind=FULL, with_info=True)
        return list(zip(views, measured)), _redis_summary(info or {})


def _redis_summary(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": info.get("redis_version"),
        "uptime_in_seconds": info.get("uptime_in_seconds"),
        "connected_clients": info.get("connected_clients"),
        "used_memory": info.get("used_memory"),
        "used_memory_human": info.get("used_memory_human"),
        "used_memory_peak": info.get("used_memory_peak"),
        "used_memory_peak_human": info.get("used_memory_peak_human"),
    }


def cached_registry(client: redis.Redis, ttl: float = REGISTRY_TTL) -> Callable[[], list[WorkerInfo]]:
    """registry.known(client), read again at most every ``ttl`` seconds."""
    lock = threading.Lock()
    cache: dict[str, Any] = {"at": float("-inf"), "workers": []}

    def workers() -> list[WorkerInfo]:
        now = time.monotonic()
        if now - cache["at"] >= ttl:
            with lock:
                if now - cache["at"] >= ttl:
                    cache["workers"] = registry.known(client)
                    cache["at"] = time.monotonic()
        return cache["workers"]

    return workers


def load_app(path: str) -> Runtime:
    """Run the app file that calls ``lowkiq.configure`` (as ``lowkiq -r`` does) and return its runtime."""
    from .. import runtime as runtime_module

    file = Path(path).resolve()
    if not file.is_file():
        raise RuntimeError(f"LOWKIQ_APP={path!r}: no such file")
    # The app imports its own modules relative to its folder.
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    before = runtime_module._current
    runpy.run_path(str(file), run_name="__lowkiq_app__")
    after = runtime_module._current
    if after is None or after is before:
        raise RuntimeError(f"LOWKIQ_APP={path!r} did not call lowkiq.configure(workers=[...])")
    return after


def standalone_console(environ: dict[str, str]) -> Console:
    """The console of ``create_app()``: LOWKIQ_APP, else the registry at the configured Redis."""
    app_file = environ.get("LOWKIQ_APP")
    if app_file:
        return Console.from_runtime(load_app(app_file))
    url = redis_url_from(None, environ) or connection.embedded_url()
    return Console.from_url(url)
