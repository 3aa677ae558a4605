"""What the tests of `lowkiq web` share: the real command started on a free port, and a plain GET of it."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

from redis_server import free_port
from server_support import lowkiq_bin


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert reply.status == 200
        return reply.read()


def start(*args: str, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    # A session of its own: only the signals this test sends reach it.
    process = subprocess.Popen([lowkiq_bin(), "web", "--bind", f"127.0.0.1:{port}", "--workers", "1", *args],
                               cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, process.stdout.read()
        try:
            get(base)
            return process, base
        except OSError:
            assert time.monotonic() < deadline, "the console never answered"
            time.sleep(0.2)
