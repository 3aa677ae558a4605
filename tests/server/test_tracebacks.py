"""A failure's traceback is stored beside its error and follows the job: retried, taken again, into the
morgue, through kill_failed; capped; shown folded and escaped on the job page; in the job lookup of the
API and the CLI, never in listings."""

from __future__ import annotations

import pytest
from queue_support import held_lease, restore

import lowkiq
from lowkiq import stored_error
from lowkiq.server.shard_handler import ShardHandler
from lowkiq.store.lua import Wire
from lowkiq.webui import blueprint


def load_customer(payload):
    return payload["customer_id"]


class Billing(lowkiq.Worker):
    shards_count = 1
    batch_size = 5
    max_retry_count = 2
    depth = 0

    def retry_in(self, retry_count):
        return 0

    def perform(self, payloads_by_id):
        if Billing.depth:
            recurse(Billing.depth)
        for payloads in payloads_by_id.values():
            try:
                load_customer(payloads[-1])
            except KeyError as exc:
                raise RuntimeError("<b>charge failed</b>") from exc


def recurse(n):
    """A chain of n causes: a traceback longer than any limit (repeated frames would be folded)."""
    error = None
    for step in range(n):
        try:
            raise ValueError(f"step {step}") from error
        except ValueError as exc:
            error = exc
    raise ValueError("deep") from error


@pytest.fixture
def runtime(configure):
    Billing.depth = 0
    return configure(workers=[Billing])


def fail_once(runtime, **options):
    if options:
        runtime = lowkiq.configure(redis_url=runtime.settings.redis_url, workers=[Billing], **options)
    q = runtime.queue(Billing)
    h = ShardHandler(held_lease(q, 0), Billing(), q, runtime.settings, Wire(runtime.client), clock=lambda: 1000.0)
    taken = h.take(None)
    assert taken.jobs
    assert h.perform(taken) is None  # it failed
    return h


def test_the_traceback_is_stored_beside_the_error_and_follows_the_job_to_the_morgue(runtime):
    Billing.perform_async([{"id": "c1", "payload": {"amount": 5}}])
    fail_once(runtime)
    job = runtime.queries(Billing).job("c1")
    assert job.error == "RuntimeError: <b>charge failed</b>"
    assert "in load_customer" in job.traceback and "KeyError: 'customer_id'" in job.traceback
    assert "direct cause of the following exception" in job.traceback
    assert job.traceback.rstrip().endswith("RuntimeError: <b>charge failed</b>")
    # Taken again, it carries the traceback into processing; failing again replaces it.
    q = runtime.queue(Billing)
    taken = q.ack_and_take(None, (held_lease(q, 0), 5))
    assert [j.traceback for j in taken.jobs] == [job.traceback]
    restore(q, held_lease(q, 0))
    fail_once(runtime)
    fail_once(runtime)  # retry_count reaches max_retry_count: to the morgue
    dead = runtime.queries(Billing).morgue_job("c1")
    assert dead.error == "RuntimeError: <b>charge failed</b>" and "in load_customer" in dead.traceback


def test_kill_failed_keeps_the_traceback(runtime):
    Billing.perform_async([{"id": "c2", "payload": {}}])
    fail_once(runtime)
    assert runtime.actions(Billing).kill_failed() == 1
    assert "KeyError: 'customer_id'" in runtime.queries(Billing).morgue_job("c2").traceback


def test_a_long_traceback_keeps_its_head_and_tail_within_the_limit(runtime):
    Billing.depth = 60
    Billing.perform_async([{"id": "c3", "payload": {}}])
    fail_once(runtime, traceback_limit=2000)
    text = runtime.queries(Billing).job("c3").traceback
    assert text.startswith("Traceback (most recent call last):") and "characters left out" in text
    assert text.rstrip().endswith("ValueError: deep") and len(text) < 2100


def test_traceback_limit_0_stores_none_and_the_error_reads_as_before(runtime, r):
    Billing.perform_async([{"id": "c4", "payload": {}}])
    fail_once(runtime, traceback_limit=0)
    job = runtime.queries(Billing).job("c4")
    assert (job.error, job.traceback) == ("RuntimeError: <b>charge failed</b>", None)
    assert r.hget(Billing.keys().shard(0).errors_hash, "c4") == b"RuntimeError: <b>charge failed</b>"


def test_a_bad_traceback_limit_is_refused(configure):
    with pytest.raises(ValueError, match="traceback_limit must be a number of characters 0..1048576"):
        configure(workers=[Billing], traceback_limit=-1)


def test_a_value_that_only_looks_packed_reads_whole():
    fake = stored_error.MARK + (10**6).to_bytes(4, "big") + b"short"
    assert stored_error.unpack(fake) == (fake, None)
    assert stored_error.unpack(stored_error.pack(b"E: x", "")) == (b"E: x", None)


def test_the_job_page_folds_the_traceback_and_escapes_it_the_api_shows_it_in_lookups_only(runtime):
    from flask import Flask

    Billing.perform_async([{"id": "c5", "payload": {}}])
    fail_once(runtime)
    app = Flask(__name__)
    app.register_blueprint(blueprint, url_prefix="/lowkiq")
    client = app.test_client()
    page = client.get("/lowkiq/workers/Billing/jobs/c5").get_data(as_text=True)
    assert '<details class="traceback"><summary>Traceback</summary>' in page
    assert "&lt;b&gt;charge failed&lt;/b&gt;" in page and "<b>charge failed</b>" not in page
    looked_up = client.get("/lowkiq/api/v1/workers/Billing/jobs/c5").get_json()
    assert "in load_customer" in looked_up["queued"]["traceback"]
    listed = client.get("/lowkiq/api/v1/workers/Billing/enqueued").get_json()
    assert "traceback" not in listed["jobs"][0]
