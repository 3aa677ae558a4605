"""The console on versions waiting for other ids (``after``, docs/dependencies.md): the job page and the API say
what each waits on and where that is (a dead dependency shown as such), the worker page counts the waiting ids;
operators' data escaped."""

from __future__ import annotations

import re

from webui_support import XSS, MailerWorker, OrdersWorker, fail

API = "/lowkiq/api/v1"
DEPENDENCY = "<b>c1</b>"


def enqueue_waiting(runtime) -> None:
    OrdersWorker.perform_async([{"id": DEPENDENCY, "payload": "create"}, {"id": "c2"}])
    MailerWorker.perform_async([{"id": "m1", "payload": XSS,
                                 "after": [{"worker": "OrdersWorker", "id": DEPENDENCY},
                                           {"worker": "OrdersWorker", "id": "c2"}]}])
    fail(runtime, OrdersWorker, [DEPENDENCY])
    runtime.actions(OrdersWorker).kill_failed()  # the dependency dies: it holds its dependent


def test_the_api_says_what_a_version_waits_on(client, runtime):
    enqueue_waiting(runtime)
    data = client.get(f"{API}/workers/MailerWorker/jobs/m1").get_json()
    assert (data["queued"], data["busy"], data["morgue"]) == (None, None, None)
    [version] = data["waiting"]
    assert version["payload"] == XSS
    assert version["after"] == [{"worker": "OrdersWorker", "id": DEPENDENCY, "state": "dead"},
                                {"worker": "OrdersWorker", "id": "c2", "state": "queued"}]
    assert data["dependents"] == []
    assert client.get(f"{API}/workers/MailerWorker/jobs/m2").status_code == 404
    dead = client.get(f"{API}/workers/OrdersWorker/job", query_string={"id": DEPENDENCY}).get_json()
    assert dead["morgue"] and dead["dependents"] == [{"worker": "MailerWorker", "id": "m1"}]


def test_the_job_page_shows_the_waiting_version_escaped(client, runtime):
    enqueue_waiting(runtime)
    page = client.get("/lowkiq/workers/MailerWorker/job", query_string={"id": "m1"})
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="job-waiting"' in html
    assert XSS not in html and DEPENDENCY not in html
    assert "&lt;b&gt;c1&lt;/b&gt;" in html
    assert 'data-waits-on="dead"' in html and 'data-waits-on="queued"' in html
    dead = client.get("/lowkiq/workers/OrdersWorker/job", query_string={"id": DEPENDENCY}).get_data(as_text=True)
    assert 'id="job-dependents"' in dead and ">m1</code>" in dead and "&lt;b&gt;c1&lt;/b&gt;" in dead


def test_the_worker_page_counts_waiting_ids(client, runtime):
    counts = client.get("/lowkiq/workers/MailerWorker/_counts").get_data(as_text=True)
    assert 'data-count="waiting"' not in counts
    enqueue_waiting(runtime)
    counts = client.get("/lowkiq/workers/MailerWorker/_counts").get_data(as_text=True)
    assert re.search(r'data-count="waiting"[^>]*>1 waiting<', counts)
