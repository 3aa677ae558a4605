"""Fixtures of the browser tests: a real console and server on their own Redis, and a page of headless Chromium."""


from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from queue_support import held_lease
from redis_server import RedisServer, free_port

import lowkiq

CHROMIUM = "/usr/bin/chromium"
BIN = Path(sys.executable).parent

APP = """
import time
import lowkiq

class SlowWorker(lowkiq.Worker):
    shards_count = 4
    def perform(self, payloads_by_id):
        time.sleep(0.02)

class DeadWorker(lowkiq.Worker):
    shards_count = 3
    def retry_in(self, retry_count):
        return 3600
    def perform(self, payloads_by_id):
        raise RuntimeError("still broken")

lowkiq.configure(workers=[SlowWorker, DeadWorker])
"""


class SlowWorker(lowkiq.Worker):
    shards_count = 4

    def perform(self, payloads_by_id):
        pass


class DeadWorker(lowkiq.Worker):
    shards_count = 3

    def perform(self, payloads_by_id):
        pass


def wait_http(url: str, process: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{process.args} exited with {process.returncode}"
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def seeded(redis: RedisServer) -> Iterator[lowkiq.runtime.Runtime]:
    runtime = lowkiq.configure(workers=[SlowWorker, DeadWorker], redis_url=redis.url)
    # Five dead jobs, made before any server runs.
    DeadWorker.perform_async([{"id": f"dead-{i}", "payload": {"n": i}} for i in range(5)])
    q = runtime.queue(DeadWorker)
    for shard in range(DeadWorker.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 100))
        q.fail(held_lease(q, shard), [(j.id, time.time() + 3600) for j in taken.jobs], b"RuntimeError: broken", 25)
    assert runtime.actions(DeadWorker).kill_failed() == 5
    SlowWorker.perform_async([{"id": i, "payload": i} for i in range(1500)])
    yield runtime
    lowkiq.runtime._current = None


@pytest.fixture
def console(redis: RedisServer, seeded, tmp_path: Path) -> Iterator[str]:
    """The standalone console under gunicorn (two workers: they share the CSRF secret)."""
    port = free_port()
    env = {**os.environ, "LOWKIQ_REDIS_URL": redis.url, "LOWKIQ_WEB_POLL_INTERVAL": "1"}
    # Started outside the source tree, whose lowkiq/ folder would shadow the installed package.
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "-w", "2", "--threads", "2", "-b", f"127.0.0.1:{port}", "lowkiq.webui:create_app()"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/api/v1/stats", process)
        yield base
    finally:
        stop(process)


@pytest.fixture
def server(redis: RedisServer, tmp_path: Path) -> Iterator[subprocess.Popen]:
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    env = {**os.environ, "LOWKIQ_REDIS_URL": redis.url}
    process = subprocess.Popen(
        [str(BIN / "lowkiq"), "-r", "app.py", "--poll-interval", "0.2"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    yield process
    stop(process)


@pytest.fixture
def page(console: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        yield tab
        browser.close()
        # No CSP violation nor script error on any page visited.
        assert errors == []


@pytest.fixture
def chromium():
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield browser
        browser.close()


def open_page(chromium, **context):
    """A page in a new context, with the list its console errors and page errors go to."""
    page = chromium.new_context(**context).new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def number(text: str) -> int:
    return int(re.sub(r"[^\d]", "", text))
