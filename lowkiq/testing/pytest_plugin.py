"""The ``lowkiq`` pytest plugin (entry point ``pytest11: lowkiq``): the ``lowkiq_redis`` fixture.

A private ``redis-server`` (the one on ``PATH``, else the embedded package's) starts once per test
session, on a free port, its files in a temporary folder; each test that asks for ``lowkiq_redis``
gets it flushed, with lowkiq configured to use it. Nothing happens for tests that do not ask: the
plugin has no autouse fixture and starts nothing when imported.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
import redis

START_TIMEOUT = 10.0


@dataclass(frozen=True)
class LowkiqRedis:
    """What ``lowkiq_redis`` gives a test: the private Redis's ``url`` (lowkiq is configured with it, and
    ``LOWKIQ_REDIS_URL`` is set to it for processes the test starts) and a redis-py ``client`` of it."""

    url: str
    client: redis.Redis


class RedisProcess:
    """A redis-server of the test session's: no persistence, bound to 127.0.0.1 on a free port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisProcess:
        command = [_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                   "--save", "", "--appendonly", "no", "--logfile", str(self.directory / "redis.log")]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                with contextlib.suppress(redis.ConnectionError):
                    if client.ping():
                        return self
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"lowkiq_redis: {command[0]} did not start on port {self.port}; "
                                       f"see {self.directory / 'redis.log'}")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _binary() -> str:
    """``redis-server`` on PATH, else the embedded package's (``pip install "lowkiq[embedded]"``)."""
    found = shutil.which("redis-server")
    if found:
        return found
    from ..connection import embedded_binary

    return embedded_binary()


@pytest.fixture(scope="session")
def lowkiq_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """The session's private redis-server (started at the first test that needs it)."""
    server = RedisProcess(tmp_path_factory.mktemp("lowkiq-redis")).start()
    yield server
    server.stop()


@pytest.fixture
def lowkiq_redis(lowkiq_redis_server: RedisProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[LowkiqRedis]:
    """The session's private Redis, flushed, with lowkiq configured to use it for this test.

    An app configured already (its module calls ``lowkiq.configure(workers=[...])``) keeps every
    setting but the Redis URL; an app configured during the test finds the URL in ``LOWKIQ_REDIS_URL``.
    After the test, lowkiq's configuration is the one before it.
    """
    from .. import runtime

    client = redis.Redis.from_url(lowkiq_redis_server.url)
    client.flushall()
    monkeypatch.setenv("LOWKIQ_REDIS_URL", lowkiq_redis_server.url)
    before = runtime._current
    options: dict[str, Any] = {}
    if before is not None:
        options = {f.name: getattr(before.settings, f.name) for f in fields(before.settings)}
    runtime.configure(**{**options, "redis_url": lowkiq_redis_server.url})
    try:
        yield LowkiqRedis(lowkiq_redis_server.url, client)
    finally:
        if runtime._current is not None:
            runtime._current.close()
        runtime._current = before
        client.close()
