"""The console in headless Chromium: gunicorn serving it, a lowkiq server processing jobs.

Debian's /usr/bin/chromium driven by Playwright (never a downloaded browser).
"""

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

pytestmark = [pytest.mark.browser, pytest.mark.slow]

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


class DeadWorker(lowkiq.Worker):
    shards_count = 3


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


def number(text: str) -> int:
    return int(re.sub(r"[^\d]", "", text))


def test_dashboard_moves_and_morgue_requeue_in_a_real_browser(page, console, server, seeded):
    page.goto(console + "/")
    processed = page.locator('[data-total="processed"]')
    start = number(processed.inner_text())
    # The live fragment refreshes in place: the same page, new numbers.
    page.wait_for_function(
        f"() => parseInt(document.querySelector('[data-total=processed]').textContent.replace(/\\D/g, '')) > {start}",
        timeout=20_000,
    )
    assert page.url == console + "/"
    moved = number(processed.inner_text())
    page.wait_for_function(
        f"() => parseInt(document.querySelector('[data-total=processed]').textContent.replace(/\\D/g, '')) > {moved}",
        timeout=20_000,
    )
    # Pausing stops the refresh.
    page.click("#live-toggle")
    assert page.inner_text("#live-toggle") == "Resume"
    page.click("#live-toggle")

    page.goto(console + "/workers/DeadWorker/morgue?order_by=id")
    assert page.locator("input[name=ids]").count() == 5
    page.wait_for_selector('[data-count="dead"]')  # tab counts arrive after the page
    assert number(page.inner_text('[data-count="dead"]')) == 5
    assert number(page.inner_text('[data-count="enqueued"]')) == 0
    ids = page.locator("input[name=ids]")
    assert [ids.nth(i).get_attribute("value") for i in range(5)] == [f"dead-{i}" for i in range(5)]
    ids.nth(0).check()
    ids.nth(1).check()
    page.click("#requeue-selected")
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "Requeued 2 jobs from the morgue."
    assert "order_by=id" in page.url
    remaining = page.locator("input[name=ids]")
    assert [remaining.nth(i).get_attribute("value") for i in range(remaining.count())] == ["dead-2", "dead-3", "dead-4"]
    page.wait_for_selector('[data-count="dead"]')
    assert number(page.inner_text('[data-count="dead"]')) == 3
    # The two jobs are back in the queue: the server tries them, they fail, and wait for a
    # retry. One may be in processing at any instant, so look until both are queued.
    deadline = time.monotonic() + 15
    while True:
        page.goto(console + "/workers/DeadWorker/enqueued?order_by=id")
        listed = page.locator("td.id a")
        queued = [listed.nth(i).inner_text() for i in range(listed.count())]
        if queued == ["dead-0", "dead-1"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert queued == ["dead-0", "dead-1"]
    page.wait_for_selector('[data-count="enqueued"]')
    assert number(page.inner_text('[data-count="enqueued"]')) == 2
    page.goto(console + "/")
    dead = page.locator('tr[data-worker="DeadWorker"] td[data-col="dead"]')
    assert number(dead.inner_text()) == 3
