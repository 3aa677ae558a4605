"""An operator filters the dead tab by a tag in headless Chromium, requeues exactly the jobs counted, and
follows a job page's tag to the tab filtered by it (docs/tags.md)."""

from __future__ import annotations

import time

import pytest
from browser_support import DeadWorker
from queue_support import held_lease

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def kill(runtime, jobs: list[dict]) -> None:
    DeadWorker.perform_async(jobs)
    q = runtime.queue(DeadWorker)
    for shard in range(DeadWorker.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 100))
        if taken and taken.jobs:
            q.fail(held_lease(q, shard), [(j.id, time.time() + 3600) for j in taken.jobs], b"RuntimeError: x", 25)
    runtime.actions(DeadWorker).kill_failed()


def test_filter_the_dead_tab_by_a_tag_and_requeue_exactly_those(page, console, seeded):
    kill(seeded, [{"id": f"acme-{i}", "tags": ["tenant <acme>"]} for i in range(3)])
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console + "/workers/DeadWorker/jobs/acme-0")
    assert page.inner_text("#job-tags") == "Tags: tenant <acme>"  # shown as text, escaped
    page.click("#job-tags a")
    page.wait_for_selector("#tag-paging")
    assert page.input_value("input[name=tag]") == "tenant <acme>"
    shown = page.locator("input[name=ids]")
    assert sorted(shown.nth(i).get_attribute("value") for i in range(shown.count())) == ["acme-0", "acme-1", "acme-2"]
    page.click("#requeue-matching")
    page.wait_for_selector("#confirm-panel")
    assert "Requeue 3 dead jobs?" in page.inner_text("#confirm-panel")
    kill(seeded, [{"id": "acme-late", "tags": ["tenant <acme>"]}])  # dies after the count
    page.click("#confirm-action")
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash").startswith("Requeued 3 dead jobs (tagged 'tenant <acme>')")
    q = seeded.queries(DeadWorker)
    assert sorted(j.id for j in q.enqueued(order_by="id").rows) == ["acme-0", "acme-1", "acme-2"]
    assert sorted(j.id for j in q.morgue(order_by="id").rows) == ["acme-late", *(f"dead-{i}" for i in range(5))]
