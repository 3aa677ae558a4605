"""Pausing one group from the worker page's groups table, and the Stats tab, in headless Chromium."""

from __future__ import annotations

import time

import pytest
from browser_support import SlowWorker

import lowkiq
from lowkiq.store import day_stats
from lowkiq.store.day_stats import Tally

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_pause_then_resume_one_group_from_the_groups_table(page, console, seeded):
    SlowWorker.perform_async([{"id": f"t-{i}", "group": "<i>acme</i>", "payload": i} for i in range(3)])
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console + "/workers/SlowWorker/enqueued")
    state = page.locator('[data-group-state="<i>acme</i>"]')  # arrives with the tab counts
    state.locator('[data-group-action="pause"]').click()
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash").startswith("Paused group <i>acme</i> of SlowWorker")
    page.wait_for_selector('[data-group-state="<i>acme</i>"] [data-group-paused]')
    page.locator('[data-group-state="<i>acme</i>"] [data-group-action="resume"]').click()
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "Resumed group <i>acme</i>: its jobs run again, in order."
    page.wait_for_selector('[data-group-state="<i>acme</i>"] [data-group-action="pause"]')


def test_the_stats_tab_shows_a_days_histograms(page, console, seeded):
    tally = Tally()
    now = time.time()
    tally.record("SlowWorker", [now - 1] * 7, now, 0.04)
    tally.flush(lowkiq.current().client)
    page.goto(console + "/workers/SlowWorker/enqueued")
    page.click("text=Stats")
    page.wait_for_selector("#day-stats")
    assert page.get_attribute("#day-stats", "data-day") == day_stats.day_of(now)
    run = page.locator('[data-kind="run"]')
    assert run.locator('[data-stat="count"]').inner_text() == "7"
    bar = run.locator('g[data-count="7"] rect')
    assert bar.count() == 1 and bar.bounding_box()["width"] > 100  # the day's busiest bucket: a long bar
