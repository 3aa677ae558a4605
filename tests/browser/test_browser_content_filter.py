"""An operator filters the dead tab by error text in headless Chromium and requeues exactly those jobs: the
filter's search says how far it got, the confirmation counts them, jobs that died of it later stay dead."""

from __future__ import annotations

import time

import pytest
from browser_support import DeadWorker
from queue_support import held_lease

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def kill(runtime, ids: list[str], error: bytes) -> None:
    DeadWorker.perform_async([{"id": job_id, "payload": {"to": f"{job_id}@example.com"}} for job_id in ids])
    q = runtime.queue(DeadWorker)
    for shard in range(DeadWorker.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 100))
        if taken and taken.jobs:
            q.fail(held_lease(q, shard), [(j.id, time.time() + 3600) for j in taken.jobs], error, 25)
    runtime.actions(DeadWorker).kill_failed()


def test_filter_the_dead_tab_by_error_text_and_requeue_exactly_those(page, console, seeded):
    kill(seeded, ["mail-0", "mail-1", "mail-2"], b"TimeoutError: mailbox <full>")
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console + "/workers/DeadWorker/morgue")
    page.fill("input[name=error]", "mailbox <full>")
    page.click(".filters button[type=submit]")
    page.wait_for_selector("#scan-progress")
    assert "examined 8 of 8" in page.inner_text("#scan-progress")
    shown = page.locator("input[name=ids]")
    assert sorted(shown.nth(i).get_attribute("value") for i in range(shown.count())) == ["mail-0", "mail-1", "mail-2"]
    assert "mailbox <full>" in page.inner_text("table.jobs")  # shown as text, escaped
    page.click("#requeue-matching")
    page.wait_for_selector("#confirm-panel")
    assert "Requeue 3 dead jobs?" in page.inner_text("#confirm-panel")
    kill(seeded, ["mail-late"], b"TimeoutError: mailbox <full>")  # dies of it after the count
    page.click("#confirm-action")
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash").startswith("Requeued 3 dead jobs (error containing 'mailbox <full>')")
    q = seeded.queries(DeadWorker)
    assert sorted(j.id for j in q.enqueued(order_by="id").rows) == ["mail-0", "mail-1", "mail-2"]
    assert sorted(j.id for j in q.morgue(order_by="id").rows) == [*(f"dead-{i}" for i in range(5)), "mail-late"]


def test_a_lowercase_filter_finds_the_capitalised_error_unless_match_case_is_ticked(page, console, seeded):
    kill(seeded, ["cap-0", "cap-1"], b"TimeoutError: Timeout after 30 s")
    kill(seeded, ["ord-timeout-092"], b"ValueError: timeout_ms must be a number")
    page.goto(console + "/workers/DeadWorker/morgue")
    assert not page.is_checked("input[name=match_case]")
    page.fill("input[name=error]", "timeout after")
    page.click(".filters button[type=submit]")
    page.wait_for_selector("#scan-progress")
    shown = page.locator("input[name=ids]")
    assert sorted(shown.nth(i).get_attribute("value") for i in range(shown.count())) == ["cap-0", "cap-1"]
    page.fill("input[name=error]", "timeout")
    page.check("input[name=match_case]")
    page.click(".filters button[type=submit]")
    page.wait_for_selector("#scan-progress")
    assert page.is_checked("input[name=match_case]")
    shown = page.locator("input[name=ids]")
    assert [shown.nth(i).get_attribute("value") for i in range(shown.count())] == ["ord-timeout-092"]
