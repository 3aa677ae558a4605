"""The live dashboard in a real browser says when its refresh fails, instead of showing old numbers as current."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import BIN, CHROMIUM, stop, wait_http
from redis_server import RedisServer, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def console(redis: RedisServer, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "LOWKIQ_REDIS_URL": redis.url, "LOWKIQ_WEB_POLL_INTERVAL": "0.5",
           "LOWKIQ_WEB_REDIS_TIMEOUT": "1"}
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "-w", "1", "--threads", "2", "-b", f"127.0.0.1:{port}", "lowkiq.webui:create_app()"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/api/v1/stats", process)
        yield base
    finally:
        stop(process)


def test_a_failing_refresh_shows_a_banner_greys_the_numbers_and_clears_when_redis_is_back(console, redis):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        tab = browser.new_page()
        script_errors: list[str] = []
        tab.on("pageerror", lambda e: script_errors.append(str(e)))
        tab.goto(console + "/")
        banner = tab.locator("#live-error")
        assert banner.is_hidden()
        tab.locator("#tz-toggle").click()  # times in UTC: the banner's moment follows the toggle too
        assert tab.locator("#tz-toggle").inner_text() == "UTC"

        redis.process.kill()  # Redis gone: every refresh now answers 503
        redis.process.wait(10)
        banner.wait_for(state="visible", timeout=15_000)
        assert "Live refresh failing since" in banner.inner_text() and "HTTP 503" in banner.inner_text()
        assert re.search(r"failing since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: HTTP 503", banner.inner_text()), \
            banner.inner_text()
        assert "Redis" in banner.inner_text()
        assert "stale" in (tab.locator("#live").get_attribute("class") or "")
        assert tab.locator("#live-status").inner_text() == "Live: failing"

        back = RedisServer(port=redis.port, directory=redis.directory).start()  # on the same port
        try:
            banner.wait_for(state="hidden", timeout=20_000)
            # htmx keeps the old element's classes on the new one while it settles (a few ms).
            tab.wait_for_function("() => !document.getElementById('live').classList.contains('stale')", timeout=5_000)
            assert tab.locator("#live-status").inner_text().startswith("Live: every")
        finally:
            back.stop()
        browser.close()
    assert script_errors == []
