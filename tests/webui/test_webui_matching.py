"""A filtered morgue's bulk buttons act on exactly the jobs the filter matches, counted before confirming."""

from __future__ import annotations

from webui_support import OrdersWorker, counts, make_dead, matching

from lowkiq.store import audit
from lowkiq.webui import formatting

W = "/lowkiq/workers/OrdersWorker"


def test_a_filter_showing_one_job_touches_that_job_only(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i:02}"} for i in range(64)])
    listing = W + "/morgue?order_by=id&min=job-07&max=job-07"
    page = client.get(listing)
    assert b"Requeue matching (1)" in page.data and b"Delete matching (1)" in page.data
    asked, done = matching(client, W + "/morgue/delete_matching", listing, order_by="id", min="job-07", max="job-07")
    assert "Delete 1 dead job for good?" in asked and "id from job-07 to job-07" in asked
    assert done.status_code == 303 and done.headers["Location"] == listing
    assert counts(runtime, OrdersWorker) == (0, 63)
    assert b"Deleted 1 dead job (id from job-07 to job-07)." in client.get(listing).data
    # An entry when it starts (before the first chunk), one when it ends: as every action in chunks.
    entry, started = audit.read(runtime.client)
    assert (started.action, started.count, started.scope) == ("morgue/delete_matching", 0,
                                                              "id from job-07 to job-07: started")
    assert (entry.action, entry.count, entry.scope) == ("morgue/delete_matching", 1, "id from job-07 to job-07")


def test_a_range_larger_than_a_chunk_is_requeued_whole(client, runtime, monkeypatch):
    from lowkiq import console as console_module

    monkeypatch.setattr(console_module, "MATCHING_CHUNK", 7)  # many chunks, each its own script
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i:02}"} for i in range(50)])
    listing = W + "/morgue?order_by=id&min=job-10&max=job-39"
    assert b"Requeue matching (30)" in client.get(listing).data
    matching(client, W + "/morgue/requeue_matching", listing, order_by="id", min="job-10", max="job-39")
    assert counts(runtime, OrdersWorker) == (30, 20)
    q = runtime.queries(OrdersWorker)
    assert q.job("job-10") is not None and q.job("job-39") is not None and q.job("job-40") is None


def test_without_a_filter_the_buttons_say_all_and_count_everything(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(5)])
    page = client.get(W + "/morgue")
    assert b"Requeue all (5)" in page.data and b"Delete all (5)" in page.data
    asked, _ = matching(client, W + "/morgue/requeue_matching", W + "/morgue")
    assert "Requeue 5 dead jobs?" in asked and "(all)" in asked
    assert counts(runtime, OrdersWorker) == (5, 0)
    assert b"Requeue all" not in client.get(W + "/morgue").data  # nothing dead: no buttons


def test_time_filters_count_what_they_show(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": "early"}])
    clock.advance(100)
    make_dead(runtime, OrdersWorker, [{"id": "late"}])
    late_from = repr(clock() - 1)
    page = client.get(W + "/morgue", query_string={"order_by": "updated_at", "min": late_from})
    assert b"Requeue matching (1)" in page.data
    assert runtime.queries(OrdersWorker).morgue_count("updated_at", max=late_from) == 1
    listing = W + f"/morgue?order_by=updated_at&min={late_from}"
    _, done = matching(client, W + "/morgue/requeue_matching", listing, order_by="updated_at", min=late_from)
    assert done.status_code == 303
    when = formatting.absolute(float(late_from))  # a date people read, and the exact unix time beside it
    assert f"Requeued 1 dead job (updated_at from {when} ({late_from}) to the last).".encode() in client.get(listing).data
    assert audit.read(runtime.client)[0].scope == f"updated_at from {when} ({late_from}) to the last"


def test_a_long_filter_is_shortened_in_the_flash_and_in_the_audit_log(client, runtime):
    """The flash travels in a cookie: a 5,000-character filter in it made a cookie past 4 KB, which
    browsers drop, so the count was never seen."""
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i:02}"} for i in range(10)])
    low = "job-00" + "0" * 5000  # sorts after job-00, before job-01: matches job-01 .. job-09
    high = "job-99" + "é" * 5000  # the worst case: the cookie quotes each of these as 8 characters
    listing = W + "/morgue?order_by=id"
    _, done = matching(client, W + "/morgue/requeue_matching", listing, order_by="id", min=low, max=high)
    assert done.status_code == 303
    assert len(done.headers["Set-Cookie"]) < 4000
    assert counts(runtime, OrdersWorker) == (9, 1)
    shown = client.get(listing).get_data(as_text=True)
    assert f"Requeued 9 dead jobs (id from {low[:99]}… to {high[:99]}…)." in shown
    entry, started = audit.read(runtime.client)
    assert (entry.action, entry.count) == ("morgue/requeue_matching", 9)
    # An audit entry is bounded in bytes: its scope keeps the filter's first 500 characters, and a start
    # entry's note whole after fewer of them.
    assert entry.scope == f"id from {low} to {high}"[:499] + "…"
    assert started.scope == f"id from {low} to {high}"[:490] + "…: started"
