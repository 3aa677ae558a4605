"""The console on a phone, in the dark, in another time zone, in headless Chromium: nothing wider than a
390 px screen, a dark theme that follows the system, times in UTC or local time by a toggle, and a
date-time picker for time filters that filters in the browser's own zone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_support import open_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs"
PHONE = {"width": 390, "height": 844}


def wider_than_the_screen(page) -> list[str]:
    """Elements (outside scrolling containers) whose right edge passes the viewport's."""
    return page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        const out = [];
        for (const el of document.querySelectorAll('body *')) {
            if (el.closest('.table-scroll, pre, .mainnav, svg')) continue;
            const box = el.getBoundingClientRect();
            if (box.width && box.right > width + 1) out.push(el.tagName + '.' + el.className + ' ' + Math.round(box.right));
        }
        return out;
    }""")


def test_every_page_fits_a_390_px_screen(chromium, console, seeded):
    page, errors = open_page(chromium, viewport=PHONE, is_mobile=True, has_touch=True)
    pages = ["/", "/workers/DeadWorker/morgue?order_by=id", "/workers/SlowWorker/enqueued",
             "/workers/SlowWorker/busy", "/workers/SlowWorker/stats", "/workers/DeadWorker/job?id=dead-1", "/servers",
             "/audit", "/search?id=dead-2"]
    for path in pages:
        page.goto(console + path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width, wider_than_the_screen(page))
        assert wider_than_the_screen(page) == [], path
    page.goto(console + "/")
    for count in page.locator("#summary .count").all():  # every summary number readable, none cut
        assert count.evaluate("e => e.scrollWidth <= e.clientWidth"), count.inner_text()
        box = count.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    if os.environ.get("LOWKIQ_SCREENSHOTS"):
        page.screenshot(path=str(DOCS / "dashboard-390.png"), full_page=True)
    assert errors == []


def test_the_dark_theme_follows_the_system(chromium, console, seeded):
    def background(scheme: str) -> list[int]:
        page, errors = open_page(chromium, color_scheme=scheme)
        page.goto(console + "/workers/DeadWorker/morgue?order_by=id")
        rgb = page.evaluate("getComputedStyle(document.body).backgroundColor")
        panel = page.evaluate("getComputedStyle(document.querySelector('.panel')).backgroundColor")
        ink = page.evaluate("getComputedStyle(document.body).color")
        assert errors == []
        return [sum(int(x) for x in c[c.index("(") + 1:c.index(")")].split(",")[:3]) for c in (rgb, panel, ink)]

    dark_bg, dark_panel, dark_ink = background("dark")
    light_bg, light_panel, light_ink = background("light")
    assert dark_bg < 150 and dark_panel < 150 and dark_ink > 500  # dark surfaces, light text
    assert light_bg > 600 and light_panel > 600 and light_ink < 200


def test_times_switch_between_utc_and_local_and_stay_switched(chromium, console, seeded):
    page, errors = open_page(chromium, timezone_id="America/New_York")
    page.goto(console + "/workers/DeadWorker/morgue?order_by=id")
    first = page.locator("[data-time]").first
    server_text = first.inner_text()
    toggle = page.locator("#tz-toggle")
    assert toggle.inner_text() == "Server time"
    toggle.click()
    assert toggle.inner_text() == "UTC" and first.inner_text().endswith(" UTC")
    toggle.click()
    assert toggle.inner_text() == "Local time"
    assert first.inner_text().endswith(("-0500", "-0400"))  # New York, with or without summer time
    page.reload()
    assert page.locator("#tz-toggle").inner_text() == "Local time"
    assert page.locator("[data-time]").first.inner_text().endswith(("-0500", "-0400"))
    assert server_text != page.locator("[data-time]").first.inner_text() or server_text.endswith(("-0500", "-0400"))
    page.locator("#tz-toggle").click()  # and back to the server's own rendering
    assert page.locator("#tz-toggle").inner_text() == "Server time"
    assert page.locator("[data-time]").first.inner_text() == server_text
    assert errors == []


def test_a_time_filter_uses_a_date_time_picker_in_the_browser_s_zone(chromium, console, seeded):
    page, errors = open_page(chromium, timezone_id="Asia/Tokyo")
    page.goto(console + "/workers/SlowWorker/enqueued?order_by=id")
    assert page.locator("form.filters input[name=min]").get_attribute("type") == "text"  # ids: text
    page.select_option("form.filters select[name=order_by]", "perform_in")
    assert page.locator("form.filters input[name=min]").get_attribute("type") == "datetime-local"
    # A window in Tokyo time that holds every queued job, then one that holds none.
    page.fill("form.filters input[name=min]", "2000-01-01T09:00")
    page.fill("form.filters input[name=max]", "2100-01-01T09:00")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    assert "min=946684800" in page.url  # 2000-01-01 09:00 in Tokyo is 00:00 UTC: unix seconds, zone-free
    assert page.locator("td.id").count() > 0
    assert page.locator("form.filters input[name=min]").input_value() == "2000-01-01T09:00"  # shown back in the picker
    page.fill("form.filters input[name=max]", "2000-01-02T09:00")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("td.id").count() == 0
    assert errors == []


def test_a_time_bound_left_alone_is_sent_back_exactly_and_a_switch_of_order_clears_the_bounds(
        chromium, console, seeded):
    page, errors = open_page(chromium)
    warnings: list[str] = []
    page.on("console", lambda m: warnings.append(m.text) if m.type == "warning" else None)
    page.goto(console + "/workers/SlowWorker/enqueued?order_by=perform_in&min=946684800.25&max=4102444800.75")
    rows = page.locator("td.id").count()
    assert rows > 0
    page.select_option("form.filters select[name=desc]", "1")  # only the order changes
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state()
    assert "min=946684800.25" in page.url and "max=4102444800.75" in page.url  # not rounded to a minute
    assert page.locator("td.id").count() == rows
    page.select_option("form.filters select[name=order_by]", "id")  # times mean nothing as ids
    assert page.locator("form.filters input[name=min]").input_value() == ""
    page.fill("form.filters input[name=min]", "1")
    page.select_option("form.filters select[name=order_by]", "perform_in")  # nor an id as a time (1970)
    assert page.locator("form.filters input[name=min]").input_value() == ""
    assert errors == [] and not [w for w in warnings if "does not conform" in w]
