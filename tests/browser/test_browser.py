"""The console in headless Chromium: gunicorn serving it, a lowkiq server processing jobs.

Debian's /usr/bin/chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import time

import pytest
from browser_support import number

pytestmark = [pytest.mark.browser, pytest.mark.slow]


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
    assert page.inner_text("#live-toggle") == "Resume refresh"
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
