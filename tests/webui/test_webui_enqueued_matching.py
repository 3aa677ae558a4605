"""The enqueued tab's bulk buttons (perform now, kill, delete) act on exactly the jobs its filter matches,
counted with the page before confirming, in chunks, and recorded in the audit log."""

from __future__ import annotations

from webui_support import OrdersWorker, counts, csrf, fail, matching

from lowkiq.store import audit

W = "/lowkiq/workers/OrdersWorker"


def post(client, verb: str, listing: str, **form: str):
    """The button, then Confirm on the page that shows the count: the response to Confirm."""
    return matching(client, f"{W}/enqueued/{verb}_matching", listing, **form)[1]


def test_delete_matching_an_id_range_deletes_that_range_only(client, runtime, monkeypatch):
    from lowkiq import console as console_module

    monkeypatch.setattr(console_module, "MATCHING_CHUNK", 3)  # several chunks, none skipped or repeated
    OrdersWorker.perform_async([{"id": f"job-{i:02}"} for i in range(50)])
    listing = W + "/enqueued?order_by=id&min=job-10&max=job-19"
    page = client.get(listing).get_data(as_text=True)
    assert "Delete matching (10)" in page and "Kill matching (10)" in page and "Perform now matching (10)" in page
    asked, done = matching(client, f"{W}/enqueued/delete_matching", listing, order_by="id", min="job-10", max="job-19")
    assert "Delete 10 queued jobs for good?" in asked
    assert done.status_code == 303 and done.headers["Location"] == listing
    assert counts(runtime, OrdersWorker) == (40, 0)
    q = runtime.queries(OrdersWorker)
    assert q.job("job-09") is not None and q.job("job-10") is None and q.job("job-19") is None and q.job("job-20")
    assert "Deleted 10 queued jobs (id from job-10 to job-19)." in client.get(listing).get_data(as_text=True)
    entry, started = audit.read(runtime.client)
    assert (entry.action, entry.count, entry.scope) == ("enqueued/delete_matching", 10, "id from job-10 to job-19")
    assert (started.action, started.count, started.scope) == ("enqueued/delete_matching", 0,
                                                              "id from job-10 to job-19: started")


def test_kill_matching_a_retry_count_range_moves_only_the_failed_jobs_with_their_error(client, runtime):
    OrdersWorker.perform_async([{"id": f"f{i}"} for i in range(4)] + [{"id": f"ok{i}"} for i in range(6)])
    fail(runtime, OrdersWorker, [f"f{i}" for i in range(4)], error=b"KeyError: 'x'")
    failed = [j.id for j in runtime.queries(OrdersWorker).enqueued("retry_count", min=0, limit=100).rows]
    assert failed  # the shards of f0..f3 were taken: every job of them failed once
    listing = W + "/enqueued?order_by=retry_count&min=0"
    assert f"Kill matching ({len(failed)})" in client.get(listing).get_data(as_text=True)
    assert f"Kill all ({10})" in client.get(W + "/enqueued").get_data(as_text=True)  # no filter: every job
    post(client, "kill", listing, order_by="retry_count", min="0")
    q = runtime.queries(OrdersWorker)
    assert counts(runtime, OrdersWorker) == (10 - len(failed), len(failed))
    assert all(q.morgue_job(i).error == "KeyError: 'x'" for i in failed)


def test_a_retry_count_range_that_includes_minus_1_counts_the_fresh_jobs(client, runtime):
    OrdersWorker.perform_async([{"id": f"n{i}"} for i in range(5)])
    assert "Delete matching (5)" in client.get(W + "/enqueued?order_by=retry_count&max=0").get_data(as_text=True)
    assert "Delete matching" not in client.get(W + "/enqueued?order_by=retry_count&min=0").get_data(as_text=True)


def test_perform_now_matching_makes_only_the_future_jobs_of_the_range_due(client, runtime):
    now = runtime.clock()
    OrdersWorker.perform_async([{"id": f"later{i}", "perform_in": now + 3600 + i} for i in range(6)]
                               + [{"id": "due", "perform_in": now - 5}, {"id": "far", "perform_in": now + 86400}])
    low, high = now + 3600, now + 3602
    listing = f"{W}/enqueued?order_by=perform_in&min={low!r}&max={high!r}"
    assert "Perform now matching (3)" in client.get(listing).get_data(as_text=True)
    post(client, "perform_now", listing, order_by="perform_in", min=repr(low), max=repr(high))
    q = runtime.queries(OrdersWorker)
    made_due = {f"later{i}" for i in range(3)}
    assert all(q.job(i).perform_in <= runtime.clock() for i in made_due)
    assert all(q.job(f"later{i}").perform_in > now + 3600 for i in range(3, 6))
    assert q.job("far").perform_in == now + 86400 and q.job("due").perform_in == now - 5
    entry, _ = audit.read(runtime.client)  # the start entry, then this
    assert (entry.action, entry.count) == ("enqueued/perform_now_matching", 3)


def test_an_unknown_verb_is_404_and_read_only_hides_the_buttons(client, runtime):
    OrdersWorker.perform_async([{"id": "1"}])
    token = csrf(client, W + "/enqueued")
    assert client.post(W + "/enqueued/requeue_matching", data={"csrf_token": token}).status_code == 404
    assert counts(runtime, OrdersWorker) == (1, 0)
    from webui_support import host_app

    readonly = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    assert "Delete all (1)" not in readonly.get(W + "/enqueued").get_data(as_text=True)
