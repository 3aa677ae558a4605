"""Helpers for the server tests: the installed `lowkiq` script as a subprocess, and what its apps recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

import lowkiq

APPS = Path(__file__).parent / "apps"
# Shorter leases than the defaults, so that a takeover after kill -9 happens within a test's patience.
FAST_LEASES = {"LOWKIQ_LEASE_TTL": "2", "LOWKIQ_HEARTBEAT_INTERVAL": "0.3", "LOWKIQ_SETTLE": "0.3"}
APP = APPS / "app.py"


def lowkiq_bin() -> str:
    """The console script of the virtualenv running the tests (the installed package, not the tree)."""
    return str(Path(sys.executable).parent / "lowkiq")


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def start_server(tmp: Path, redis_url: str, *args: str, app: Path = APP, env: dict[str, str] | None = None,
                 name: str = "server") -> ServerProcess:
    """``lowkiq -r app`` with cwd in ``tmp``; records of the test app go to ``tmp/records``."""
    records = tmp / "records"
    records.mkdir(exist_ok=True)
    log_path = tmp / f"{name}.log"
    environment = {
        **os.environ,
        "LOWKIQ_REDIS_URL": redis_url,
        "APP_RECORD_DIR": str(records),
        "LOWKIQ_TTIN_FILE": str(tmp / "ttin.txt"),
        **(env or {}),
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen([lowkiq_bin(), "-r", str(app), *args], cwd=tmp, env=environment,
                                   stdout=log, stderr=subprocess.STDOUT)
    return ServerProcess(process, log_path)


def run_cli(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run([lowkiq_bin(), *args], cwd=tmp, env=environment, capture_output=True, text=True,
                          timeout=timeout)


def records(tmp: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Every record the test app wrote, in time order."""
    out = []
    folder = tmp / "records"
    for file in folder.glob("*.jsonl") if folder.exists() else []:
        # Only whole lines: a line still being written (or cut short by kill -9) has no newline yet.
        *whole, _unfinished = file.read_text().split("\n")
        out.extend(json.loads(line) for line in whole if line.strip())
    out.sort(key=lambda r: r["t"])
    return [r for r in out if kind is None or r["kind"] == kind]


def performed_ids(tmp: Path, worker: str, kind: str = "perform") -> dict[str, list[list[Any]]]:
    """id -> the payload lists it was handed, one per successful perform, in order."""
    out: dict[str, list[list[Any]]] = {}
    for rec in records(tmp, kind):
        if rec.get("worker") == worker and rec.get("ok", True):
            for job_id, payloads in rec["batch"].items():
                out.setdefault(job_id, []).append(payloads)
    return out


def queue_empty(r: redis.Redis, worker: Any) -> bool:
    """Nothing ready and nothing in processing in any shard of the worker."""
    pipe = r.pipeline()
    for shard in worker.keys().shards():
        pipe.zcard(shard.ids_by_perform_in_zset)
        pipe.hlen(shard.processing_hash)
    return sum(pipe.execute()) == 0


def busy_count(r: redis.Redis, worker: Any) -> int:
    pipe = r.pipeline()
    for shard in worker.keys().shards():
        pipe.hlen(shard.processing_hash)
    return sum(pipe.execute())


def ids_per_shard(worker: Any, per_shard: int) -> list[str]:
    """Ids chosen so that every shard of the worker gets ``per_shard`` of them."""
    from lowkiq.store.codec import shard_of

    found: dict[int, list[str]] = {s: [] for s in range(worker.shards_count)}
    i = 0
    while any(len(v) < per_shard for v in found.values()):
        bucket = found[shard_of(str(i), worker.shards_count)]
        if len(bucket) < per_shard:
            bucket.append(str(i))
        i += 1
    return [job_id for ids in found.values() for job_id in ids]


def import_app() -> Any:
    """The test app's module, imported here so tests enqueue with its very worker classes.

    Importing it calls ``lowkiq.configure``; tests configure again afterwards
    (the ``configure`` fixture) to point at the test Redis.
    """
    import importlib

    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    return importlib.import_module("app")


# ---- fixtures shared by the fault tests (a plugin of conftest.py) ----


@pytest.fixture
def runtime_of(redis_url: str, r: redis.Redis) -> Iterator[Any]:  # r: a flushed Redis
    """Configure lowkiq against the test Redis for one worker: ``runtime_of(Worker)``."""
    yield lambda worker: lowkiq.configure(redis_url=redis_url, workers=[worker])
    lowkiq.runtime._current = None


@pytest.fixture
def versions(configure: Any) -> type[lowkiq.Worker]:
    """The versions app's worker, configured against the test Redis with the real clock."""
    import importlib

    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    module = importlib.import_module("versions_app")
    configure(workers=[module.Versions])
    lowkiq.current().clock = time.time
    return module.Versions
