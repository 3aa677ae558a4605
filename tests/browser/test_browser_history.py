"""An id performed earlier, opened in headless Chromium: the search leads to its job page, whose history says
where it ran (the server's host and pid, the thread), when, and how it ended (docs/history.md)."""

from __future__ import annotations

import re
import socket

import pytest
from browser_support import SlowWorker, open_page
from timing_support import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_an_id_performed_earlier_is_found_with_its_history(chromium, console, seeded, server):
    histories = seeded.histories(SlowWorker)
    wait_until(lambda: any(e.kind == "performed" for e in histories.of("7").events), timeout=30)
    page, errors = open_page(chromium, viewport={"width": 1400, "height": 900})
    page.goto(console + "/")
    page.fill("input[name=id]", "7")
    page.press("input[name=id]", "Enter")
    page.wait_for_selector("#history")
    assert page.url.endswith("/workers/SlowWorker/job?id=7")
    assert "No job with this id is queued, in processing or dead: its history is below." in page.inner_text("main")
    kinds = page.locator("#history [data-kind]").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert kinds == ["performed", "taken", "enqueued"]
    performed = page.locator('#history [data-kind="performed"]')
    where = performed.locator("[data-server]").inner_text()
    assert re.search(rf"server {re.escape(socket.gethostname())} pid {server.pid}\b", where), where
    assert "thread lowkiq" in where and "token" in where
    # when: a relative time that ticks, over the absolute one
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d .+", performed.locator(".timeline-when .sub").inner_text())
    assert performed.locator("time[data-ago]").count() == 1
    assert errors == []
