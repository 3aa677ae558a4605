"""The work comes first, in headless Chromium: on a worker's dead tab the list and its actions ("Requeue
matching", the filtered count) are above the charts and the groups table, the first dead row above the fold at
1280x900 and within one screen at 390 px; the job page's card comes before the id's history; folded panels stay
as this browser left them."""

from __future__ import annotations

import pytest
from browser_support import open_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def top(page, selector: str) -> float:
    return page.locator(selector).first.bounding_box()["y"]


def test_the_first_dead_row_is_above_the_fold_on_a_desktop_and_a_phone(chromium, console, seeded):
    for viewport, extra in ((DESKTOP, {}), (PHONE, {"is_mobile": True, "has_touch": True})):
        page, errors = open_page(chromium, viewport=viewport, **extra)
        page.goto(console + "/workers/DeadWorker/morgue")
        page.wait_for_load_state("networkidle")
        row = page.locator("table.jobs tbody tr").first.bounding_box()
        assert row["y"] + row["height"] <= viewport["height"], (viewport, row)
        matching = top(page, "#requeue-matching")
        assert matching < row["y"], (viewport, matching, row)  # the bulk action is at the top of the list
        assert top(page, "#worker-history") > row["y"]  # the chart comes after the list
        assert errors == []


def test_a_phone_folds_the_filters_unless_one_is_set(chromium, console, seeded):
    page, errors = open_page(chromium, viewport=PHONE, is_mobile=True, has_touch=True)
    page.goto(console + "/workers/DeadWorker/morgue")
    page.wait_for_load_state("networkidle")
    assert not page.locator("#filters-fold").evaluate("d => d.open")
    assert "Filter and sort: all" in page.inner_text("#filters-fold summary")
    page.goto(console + "/workers/DeadWorker/morgue?error=broken")
    page.wait_for_load_state("networkidle")
    assert page.locator("#filters-fold").evaluate("d => d.open")  # a filter applied stays in view
    assert page.locator("table.jobs tbody tr").count() == 5
    assert errors == []


def test_the_job_card_comes_first_and_a_folded_panel_stays_folded(chromium, console, seeded):
    page, errors = open_page(chromium, viewport=DESKTOP)

    def remembered(state: str) -> None:
        # The browser tells of a fold by a toggle event after the click: the page stores it then.
        page.wait_for_function(f"() => localStorage.getItem('lowkiq.fold.worker-extras') === '{state}'",
                               timeout=5000)

    page.goto(console + "/workers/DeadWorker/job?id=dead-1")
    page.wait_for_load_state("networkidle")
    card = page.locator("#job-morgue").bounding_box()
    assert card["y"] < DESKTOP["height"] / 2 and top(page, "#worker-extras") > card["y"]
    page.click("#worker-extras > summary")  # fold the history and groups ...
    assert not page.locator("#worker-extras").evaluate("d => d.open")
    remembered("closed")
    page.goto(console + "/workers/DeadWorker/morgue")  # ... and every worker page of this browser keeps them folded
    page.wait_for_load_state("networkidle")
    assert not page.locator("#worker-extras").evaluate("d => d.open")
    page.click("#worker-extras > summary")
    remembered("open")
    page.reload()
    page.wait_for_load_state("networkidle")
    assert page.locator("#worker-extras").evaluate("d => d.open")
    assert errors == []
