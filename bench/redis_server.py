"""A private redis-server per benchmark: free port on 127.0.0.1, no persistence."""

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


class RedisServer:
    def __init__(self, cpus: set[int] | None = None) -> None:
        self.cpus = cpus  # pin redis-server to these CPUs (item 1's pinned runs)
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="lowkiq-bench-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def __enter__(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("the benchmarks need a system redis-server on PATH")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory,
             "--save", "", "--appendonly", "no", "--logfile", str(Path(self.directory) / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None,
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def __exit__(self, *exc: object) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid
