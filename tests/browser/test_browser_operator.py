"""An on-call operator's moves in headless Chromium: find a job by id from the header, act on exactly the
jobs a filter shows (counted on a confirmation page, then confirmed), pause and resume a queue."""

from __future__ import annotations

import pytest
from browser_support import DeadWorker

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_search_an_id_and_land_on_its_job_page(page, console):
    page.goto(console + "/")
    page.fill(".topbar-search input[name=id]", "dead-3")
    page.press(".topbar-search input[name=id]", "Enter")
    page.wait_for_selector("#job-morgue")
    assert "/workers/DeadWorker/job" in page.url
    dead = page.inner_text("#job-morgue")
    assert "RuntimeError: broken" in dead and '{"n":3}' in dead
    assert page.locator("#job-queued").count() == 0  # one place only: it is dead, not queued


def test_filter_the_morgue_see_the_count_then_requeue_exactly_those(page, console, seeded):
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console + "/workers/DeadWorker/morgue?order_by=id&min=dead-1&max=dead-3")
    button = page.locator("#requeue-matching")
    assert button.inner_text() == "Requeue matching (3)"  # what the filter matches as the page was drawn
    button.click()
    page.wait_for_selector("#confirm-panel")  # the dry run: what the action will touch, counted now
    assert "Requeue 3 dead jobs?" in page.inner_text("#confirm-panel")
    assert "dead-1" in page.inner_text("#confirm-panel")
    page.click("#confirm-action")
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "Requeued 3 dead jobs (id from dead-1 to dead-3)."
    assert "min=dead-1" in page.url  # back on the same filtered view
    page.goto(console + "/workers/DeadWorker/morgue?order_by=id")
    left = page.locator("input[name=ids]")
    assert [left.nth(i).get_attribute("value") for i in range(left.count())] == ["dead-0", "dead-4"]
    q = seeded.queries(DeadWorker)
    assert sorted(j.id for j in q.enqueued(order_by="id").rows) == ["dead-1", "dead-2", "dead-3"]


def test_pause_then_resume_from_the_worker_page(page, console, seeded):
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console + "/workers/SlowWorker/enqueued")
    page.click('[data-pause="pause"]')  # arrives with the tab counts
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash").startswith("Paused SlowWorker: servers stop taking its jobs")
    page.wait_for_selector("#pause-banner .alert")
    assert "Paused." in page.inner_text("#pause-banner")
    page.goto(console + "/")
    assert page.locator('tr[data-worker="SlowWorker"] [data-paused]').count() == 1
    page.goto(console + "/workers/SlowWorker/enqueued")
    page.click('[data-pause="resume"]')
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "Resumed SlowWorker."
    page.wait_for_selector('[data-pause="pause"]')
    assert page.locator("#pause-banner .alert").count() == 0

