"""In headless Chromium: the dashboard shows no "needs attention" band while calm, and names a stall above the
workers table, a perform over its worker's time limit, the ids a whole_id morgue holds, a schedule that missed
its tick and a group that waits far longer than the others, each with a link to where to act; the Hot ids tab
names the id that got 1,000 versions among 10,000 ids of 1 to 3 versions."""

from __future__ import annotations

import random
import time

import pytest
from attention_support import Holder, Limited, perform_for
from browser_support import DeadWorker, SlowWorker
from webui_support import make_dead

import lowkiq
from lowkiq.serializers import dump_json
from lowkiq.store import lua, schedules

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_band_is_absent_while_calm_and_names_a_hogging_group(page, console, seeded):
    page.goto(console + "/")
    page.wait_for_selector("#workers")
    assert page.locator("#attention").count() == 0
    now = time.time()
    SlowWorker.perform_async([{"id": f"tenant-a-{i}", "payload": i, "group": "tenant <a>", "perform_in": now - 900}
                              for i in range(20)])
    SlowWorker.perform_async([{"id": f"tenant-{g}", "payload": 1, "group": f"tenant {g}", "perform_in": now - 1}
                              for g in "bcd"])
    page.reload()
    page.wait_for_selector("#attention")
    item = page.locator('[data-attention="group"]')
    assert "group tenant <a> of SlowWorker waits 15 min" in item.inner_text()
    item.locator("a").first.click()
    page.wait_for_selector("#groups")
    assert "tenant <a>" in page.inner_text("#groups")
    assert page.evaluate("location.pathname").endswith("/workers/SlowWorker/enqueued")


@pytest.fixture
def attention_workers(redis, seeded):
    """The seeded system with a worker that has a time limit and one whose morgue holds its dead ids, registered
    before the console starts: a standalone console learns workers from the registry, which each of its
    processes reads again only every few seconds. Ask for it before ``page``."""
    runtime = lowkiq.configure(workers=[SlowWorker, DeadWorker, Limited, Holder], redis_url=redis.url)
    runtime.register([Limited, Holder])
    return runtime


def test_a_perform_over_its_time_limit_is_named_and_links_to_the_busy_performs(attention_workers, page, console):
    shard = perform_for(attention_workers, Limited, "slow", 95, thread="lowkiq-7")
    page.goto(console + "/")
    page.wait_for_selector("#attention")
    item = page.locator('[data-attention="over_limit"]')
    text = item.inner_text()
    assert f"Limited shard {shard} performing for 1 min" in text and "(limit 30 s)" in text and "(lowkiq-7)" in text
    item.locator("a").first.click()
    page.wait_for_selector("#shard-leases")
    assert page.evaluate("location.pathname").endswith("/workers/Limited/busy")
    assert page.locator("tr[data-over-time-limit]").count() == 1


def test_ids_held_by_a_whole_id_morgue_are_named_and_link_to_it(attention_workers, page, console):
    make_dead(attention_workers, Holder, [{"id": "held-1"}, {"id": "held-<2>"}])
    page.goto(console + "/")
    page.wait_for_selector("#attention")
    item = page.locator('[data-attention="held"]')
    assert "Holder holds 2 ids" in item.inner_text()
    assert page.locator('[data-attention="held"] a').count() == 1
    item.locator("a").first.click()
    page.wait_for_selector("#selection")
    assert page.evaluate("location.pathname").endswith("/workers/Holder/morgue")
    listed = page.inner_text("#selection")
    assert "held-1" in listed and "held-<2>" in listed


def test_the_hot_ids_tab_names_the_id_with_1000_versions(page, console, seeded):
    rng = random.Random(3)
    jobs = [{"id": f"ord-{i:05}", "payload": v} for i in range(10_000) for v in range(rng.randint(1, 3))]
    for start in range(0, len(jobs), 2_000):
        SlowWorker.perform_async(jobs[start:start + 2_000])
    for n in range(100):
        SlowWorker.perform_async([{"id": "ord-hot", "payload": 10 * n + k} for k in range(10)])
    page.goto(console + "/workers/SlowWorker/enqueued")
    page.click("#tabs >> text=Hot ids")
    page.wait_for_selector("#hot-versions")
    first = page.locator("#hot-versions tbody tr").first
    assert first.locator("td").first.inner_text() == "ord-hot" and "1,000" in first.inner_text()
    assert "entries of the history read" in page.inner_text("#hot-read")


def test_a_schedule_that_missed_its_tick_is_named_and_links_to_the_schedules(page, console, seeded):
    nightly = lowkiq.Schedule("every-minute", SlowWorker, every=60)
    schedules.register(seeded.client, [nightly])
    lua.run(seeded.client, *schedules.tick_call(nightly, [nightly.next_after(time.time() - 900)], 0.0, dump_json))
    page.goto(console + "/")
    page.wait_for_selector("#attention")
    item = page.locator('[data-attention="schedule"]')
    assert "every-minute missed its tick due" in item.inner_text()
    item.locator("a").first.click()
    page.wait_for_selector('tr[data-schedule="every-minute"]')
    assert page.locator('tr[data-runs="every-minute"] [data-run-outcome]').count() == 1


def test_a_stall_is_named_above_the_workers_table(page, console, seeded):
    from lowkiq.store.minute_totals import MinuteTotalsKeys

    DeadWorker.perform_async([{"id": f"due-{i}", "payload": i, "perform_in": time.time() - 150} for i in range(3)])
    at_ms = int((time.time() - 120) * 1000)  # a sample two minutes old counting at least what was done since
    seeded.client.xadd(MinuteTotalsKeys.stream(DeadWorker.queue_name), {"at": at_ms, "processed": 0, "failed": 100, "lag": 0,
                                                                   "length": 0, "dead": 5}, id=f"{at_ms - at_ms % 60000}-0")
    page.goto(console + "/")
    page.wait_for_selector("#stalled")
    assert "DeadWorker has jobs due for" in page.inner_text("#stalled")
    assert page.locator("#attention").bounding_box()["y"] < page.locator("#workers").bounding_box()["y"]
