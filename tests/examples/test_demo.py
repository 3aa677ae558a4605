"""`make demo`'s command: embedded Redis, producer, server and console, stopped by Ctrl-C."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"summary: ([\d,]+) ids processed, ([\d,]+) batches failed, ([\d,]+) ids moved to the morgue")


def clone_root(folder: Path) -> Path:
    """A folder shaped like the repository's root (where `make demo` runs): lowkiq/ and webui/ in it."""
    folder.mkdir()
    for name in ("lowkiq", "webui", "templates", "static", "setup.cfg", "pyproject.toml", "Makefile", "README.md"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def dashboard(port: int) -> dict[str, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/dashboard", timeout=2) as reply:
        return {q["name"]: q for q in json.load(reply)["queues"]}


@pytest.mark.slow
def test_demo_processes_jobs_fills_the_morgue_serves_the_console_and_logs_little(tmp_path):
    cwd = clone_root(tmp_path / "clone")
    log_path = tmp_path / "demo.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_EMBEDDED_DIR")}
    with open(log_path, "w") as log:
        # Started as a shell starts a background job, SIGINT ignored: Ctrl-C's signal must stop it all the same.
        demo = subprocess.Popen([str(Path(sys.executable).parent / "lowkiq-demo"), "--port", str(port), "--rate", "400",
                                 "--report-every", "2"], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        queues = None
        deadline = time.monotonic() + 60
        while True:
            assert demo.poll() is None, log_path.read_text()
            try:
                queues = dashboard(port)
                if sum(q["processed"] for q in queues.values()) and sum(q["dead"] for q in queues.values()):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the demo never showed processed and dead jobs: {queues}"
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
            assert b"Dashboard" in page.read()
        # The server's summary tells of the morgue too.
        deadline = time.monotonic() + 10
        while not any(int(m.group(3).replace(",", "")) for m in SUMMARY.finditer(log_path.read_text())):
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.5)
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(60)
        except subprocess.TimeoutExpired:
            demo.kill()
            raise
    out = log_path.read_text()
    assert demo.returncode == 0, out
    assert "demo stopped" in out
    assert "watching Redis: embedded at" in out
    # One line per failure class per interval, not a line (or a traceback) per failing batch.
    assert "Traceback" not in out
    assert re.search(r"OrderUpdates ValueError x\d+ in 2 s, e\.g\. order \d+: customer record is missing", out)
    assert re.search(r"Emails RuntimeError x\d+ in 2 s, e\.g\. SMTP 451", out)
    assert not re.search(r"lowkiq\.server: .* failed", out), out
    processed, failed, _ = (int(g.replace(",", "")) for g in SUMMARY.findall(out)[-1])
    assert processed > 0 and failed > 0
    data = cwd / ".lowkiq"
    assert (data / "appendonly.aof").exists() or any(data.glob("appendonly*"))
    assert not (data / "redis.sock").exists()  # the embedded Redis was stopped
