"""The schedules page in headless Chromium: "Run now" asks first, then names the run with a link to its job,
whose page shows the run in the id's history; the rule reads in words beside the raw cron."""

from __future__ import annotations

import pytest
from browser_support import SlowWorker

import lowkiq
from lowkiq.store import schedules

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_run_now_shows_the_run_and_links_to_its_history(page, console, seeded):
    schedules.register(seeded.client, [lowkiq.Schedule("nightly-report", SlowWorker, cron="0 3 * * *",
                                                       timezone="Europe/Berlin")])
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.goto(console + "/schedules")
    row = page.locator('tr[data-schedule="nightly-report"]')
    assert "every day at 03:00 Europe/Berlin" in row.inner_text() and "0 3 * * *" in row.inner_text()
    row.locator('button[data-verb="run"]').click()
    page.wait_for_selector("#ran")
    assert asked and "Enqueue a run of nightly-report now?" in asked[0]
    assert page.locator('tr[data-runs="nightly-report"] [data-run-outcome]').count() == 1
    page.click("#ran-job")
    page.wait_for_selector("#history")
    assert page.locator('#history [data-kind="enqueued"]').count() == 1
    assert "nightly-report" in page.inner_text("h2.job-title")
