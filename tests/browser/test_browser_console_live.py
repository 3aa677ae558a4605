"""The console as an operator watches it, in headless Chromium: pages that refresh themselves and times that
tick, charts that answer a hover with a value and a time, a hot id's job page folded to a readable height, and
the columns that matter on a 390 px phone."""

from __future__ import annotations

import re
import time

import pytest
import redis as redis_py
from browser_support import DeadWorker, SlowWorker, open_page
from queue_support import held_lease

from lowkiq.store.minute_totals import MinuteTotalsKeys

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}


def test_the_busy_page_shows_a_job_that_starts_without_a_reload(chromium, console, seeded):
    page, errors = open_page(chromium, viewport=DESKTOP)
    page.goto(console + "/workers/SlowWorker/busy")
    assert "Nothing is being processed" in page.inner_text("#live")
    page.evaluate("window.loadedOnce = true")  # gone if the page were loaded again
    q = seeded.queue(SlowWorker)
    taken = q.ack_and_take(None, (held_lease(q, 0), 3)).jobs
    assert taken
    page.wait_for_selector("#live td.id a", timeout=10_000)  # the poll every second brought it
    shown = sorted(page.locator("#live td.id a").all_inner_texts())
    assert shown == sorted(job.id for job in taken)
    assert page.evaluate("window.loadedOnce") is True
    page.wait_for_selector('[data-count="busy"]')
    page.wait_for_function("() => document.querySelector('[data-count=busy]').textContent.trim() === '3'",
                           timeout=10_000)

    # Paused, nothing refreshes; the relative times go on ticking in the browser all the same.
    page.click("#live-toggle")
    assert page.inner_text("#live-toggle") == "Resume refresh" and page.inner_text("#live-status") == "Live refresh paused"
    q.ack_and_take((held_lease(q, 0), [job.id for job in taken]), None)  # done: a refresh would drop them
    ticking = page.locator("#live [data-ago]").first
    before = ticking.inner_text()
    page.wait_for_timeout(2_500)
    assert ticking.inner_text() != before and re.fullmatch(r"[\d.]+ s ago", ticking.inner_text())
    assert sorted(page.locator("#live td.id a").all_inner_texts()) == shown
    page.click("#live-toggle")  # resumed: the finished jobs leave
    page.wait_for_selector("#live td.empty", timeout=10_000)
    assert page.evaluate("window.loadedOnce") is True
    assert errors == []


def seed_history(url: str, queue: str, minutes: int) -> None:
    """Per-minute totals up to the last minute, as servers record them: 120 jobs a minute, 2 failed, lag 4 s."""
    client = redis_py.Redis.from_url(url)
    now = int(time.time() // 60 * 60)
    for k in range(minutes, 0, -1):
        minute = now - k * 60
        n = minutes - k
        client.xadd(MinuteTotalsKeys.stream(queue), {"at": (minute + 5) * 1000, "processed": 120 * n, "failed": 2 * n,
                                                "lag": 4.0, "length": 0, "dead": 0}, id=f"{minute * 1000}-0")
    client.close()


def test_a_chart_hover_reads_out_a_value_and_its_time(chromium, console, seeded, redis):
    seed_history(redis.url, SlowWorker.queue_name, 30)
    page, errors = open_page(chromium, viewport=DESKTOP)
    page.goto(console + "/")
    page.wait_for_selector("#history .chart-box")
    plot = page.locator("#history .chart-plot").first
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
    tip = page.locator("#history .chart-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert re.match(r"\d\d:\d\d · 120 processed/min · 2 failed/min · lag 4\.0 s$", text), text
    # the time is that of the minute under the pointer: halfway along the axis
    start, end = (float(plot.locator("xpath=ancestor::figure").get_attribute(a)) for a in ("data-start", "data-end"))
    hovered = time.localtime((start + end) / 2)
    shown = [int(x) for x in text[:5].split(":")]
    assert abs((shown[0] * 60 + shown[1]) - (hovered.tm_hour * 60 + hovered.tm_min)) % 1440 <= 1
    # labelled axes: a value scale beside the plot, clock times under it
    assert page.locator("#history .chart-y").first.inner_text().split() == ["200", "100", "0"]
    assert len(page.locator("#history .chart-x text").all_inner_texts()) >= 2
    page.mouse.move(5, 5)
    tip.wait_for(state="hidden")
    assert errors == []


def test_a_thousand_payload_job_page_folds_to_two_screens(chromium, console, seeded):
    SlowWorker.perform_async([{"id": "hot", "payload": {"order_id": 42, "version": v, "status": "paid"}, "score": v}
                              for v in range(1000)])
    page, errors = open_page(chromium, viewport=DESKTOP)
    page.goto(console + "/workers/SlowWorker/job?id=hot")
    page.wait_for_load_state("networkidle")  # the tab counts and the worker's chart are in
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= 2 * DESKTOP["height"], height
    assert page.locator("table.payloads tr:visible").count() == 20
    page.click("#payloads-more-queued summary")
    assert page.locator("table.payloads tr:visible").count() == 1000
    rows = page.locator("table.payloads code.payload")
    assert [rows.nth(i).inner_text() for i in (0, 10, 999)] == [
        f'{{"order_id":42,"status":"paid","version":{v}}}' for v in (0, 10, 999)]
    assert errors == []


def test_a_phone_keeps_the_key_columns_and_the_redis_badge_in_view(chromium, console, seeded, server):
    page, errors = open_page(chromium, viewport=PHONE, is_mobile=True, has_touch=True)

    def in_view(selector: str) -> None:
        element = page.locator(selector).first
        assert element.is_visible(), selector
        box = element.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (selector, box)

    page.goto(console + "/servers")
    # the page refreshes itself until the new server holds its shards
    page.wait_for_function("() => (document.querySelector('#servers td[data-col=shards]') || {textContent: ''})"
                           ".textContent.includes('SlowWorker')", timeout=20_000)
    in_view("#servers th[data-col=shards]")
    in_view("#servers tr[data-server] td[data-col=shards]")
    assert "SlowWorker" in page.inner_text("#servers tr[data-server] td[data-col=shards]")
    in_view(".redis-label")
    assert page.inner_text(".redis-label").startswith("redis://127.0.0.1:")

    page.goto(console + "/")
    in_view("#workers th[data-col=dead]")
    in_view('#workers tr[data-worker="DeadWorker"] td[data-col=dead]')
    in_view(".redis-label")

    page.goto(console + f"/workers/{DeadWorker.__name__}/morgue?order_by=id")
    in_view("table.jobs td.check input")
    in_view("table.jobs td.id")
    in_view("#requeue-selected")
    in_view(".redis-label")
    assert errors == []
