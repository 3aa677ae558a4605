"""`make demo`'s command: embedded Redis, producer, server and console, stopped by Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from redis_server import free_port


@pytest.mark.slow
def test_demo_processes_jobs_fills_the_morgue_and_serves_the_console(tmp_path):
    # As in lowkiq's own repository: a source tree named lowkiq/ in the current directory,
    # without webui/, must not hide the installed console.
    (tmp_path / "lowkiq").mkdir()
    (tmp_path / "lowkiq" / "__init__.py").write_text("")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL")}
    demo = subprocess.Popen([str(Path(sys.executable).parent / "lowkiq-demo"), "--port", str(port), "--rate", "400"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        stats = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert demo.poll() is None, demo.stdout.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/dashboard", timeout=2) as reply:
                    stats = json.load(reply)
                queues = {q["name"]: q for q in stats["queues"]}
                if queues and sum(q["processed"] for q in queues.values()) > 0 and sum(q["dead"] for q in queues.values()) > 0:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"the demo never showed processed and dead jobs: {stats}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
            assert b"Dashboard" in page.read()
    finally:
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=60)
    assert demo.returncode == 0, out
    assert "demo stopped" in out
    assert (tmp_path / ".lowkiq" / "appendonly.aof").exists() or any((tmp_path / ".lowkiq").glob("appendonly*"))
    assert not (tmp_path / ".lowkiq" / "redis.sock").exists()  # the embedded Redis was stopped
