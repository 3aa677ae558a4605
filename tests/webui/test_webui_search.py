"""Find a job by id from the header: every worker searched, one worker goes straight to the job page; the
JSON API's search answers the same as each worker's job lookup."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from queue_support import held_lease
from webui_support import XSS, MailerWorker, OrdersWorker, make_dead

S = "/lowkiq/search"


def test_an_id_in_two_workers_lists_both_with_links(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "42", "payload": "old"}], error=b"KeyError: 'customer_id'")
    MailerWorker.perform_async([{"id": "42", "payload": "mail"}])
    page = client.get(S, query_string={"id": "42"})
    assert page.status_code == 200
    assert b"OrdersWorker" in page.data and b"MailerWorker" in page.data
    assert b"KeyError: &#39;customer_id&#39;" in page.data and b">dead<" in page.data and b">queued<" in page.data
    assert b"/lowkiq/workers/MailerWorker/job?id=42" in page.data


def test_an_id_in_one_worker_opens_its_job_page(client, runtime):
    OrdersWorker.perform_async([{"id": "a/../b", "payload": 1}])
    reply = client.get(S, query_string={"id": "a/../b"})
    assert reply.status_code == 303
    target = urlsplit(reply.headers["Location"])
    assert target.path == "/lowkiq/workers/OrdersWorker/job" and parse_qs(target.query) == {"id": ["a/../b"]}
    assert client.get(reply.headers["Location"]).status_code == 200


def test_nothing_found_is_a_404_that_says_so_and_escapes_the_id(client, runtime):
    page = client.get(S, query_string={"id": XSS})
    assert page.status_code == 404 and b"No worker holds this id" in page.data
    assert XSS.encode() not in page.data
    assert client.get(S).status_code == 200  # the empty form
    assert client.get(S, query_string={"id": "x" * 10_001}).status_code == 400


def test_every_page_has_the_search_box(client, runtime):
    for path in ("/lowkiq/", "/lowkiq/servers", "/lowkiq/audit", "/lowkiq/workers/OrdersWorker/morgue"):
        assert b'action="/lowkiq/search"' in client.get(path).data, path


# ---- the same search in the JSON API ---------------------------------------------------------

API = "/lowkiq/api/v1"


def test_the_api_search_answers_each_worker_as_its_job_lookup_does(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": "42", "payload": "old"}], error=b"KeyError: 'customer_id'")
    OrdersWorker.perform_async([{"id": "42", "payload": "again", "perform_in": clock() + 60}])
    MailerWorker.perform_async([{"id": 42, "payload": "mail"}])
    MailerWorker.perform_async([{"id": "other"}])
    reply = client.get(API + "/search", query_string={"id": "42"})
    assert reply.status_code == 200 and reply.mimetype == "application/json"
    assert reply.headers["Cache-Control"] == "no-store"
    data = reply.get_json()
    assert data["id"] == "42"
    by_worker = {entry["worker"]: entry for entry in data["found"]}
    assert sorted(by_worker) == ["MailerWorker", "OrdersWorker"] and len(data["found"]) == 2
    for worker, entry in by_worker.items():
        lookup = client.get(f"{API}/workers/{worker}/job", query_string={"id": "42"}).get_json()
        # The search leaves out what waits on dependencies (the job page and its lookup show it).
        assert {k: v for k, v in entry.items() if k != "worker"} == {
            k: v for k, v in lookup.items() if k not in ("id", "waiting", "dependents")}
    orders, mailer = by_worker["OrdersWorker"], by_worker["MailerWorker"]
    assert orders["morgue"]["error"] == "KeyError: 'customer_id'" and orders["morgue"]["payloads"][0][0] == "old"
    assert orders["queued"]["payloads"][0][0] == "again" and orders["queued"]["perform_in"] == clock() + 60
    assert orders["busy"] is None and "traceback" in orders["morgue"]
    assert mailer["queued"]["payloads"][0][0] == "mail" and mailer["busy"] is None and mailer["morgue"] is None


def test_the_api_search_finds_a_job_in_processing(client, runtime):
    OrdersWorker.perform_async([{"id": "a/../b", "payload": 1}])
    q = runtime.queue(OrdersWorker)
    q.ack_and_take(None, (held_lease(q, q.shard_of("a/../b")), 5))
    [entry] = client.get(API + "/search", query_string={"id": "a/../b"}).get_json()["found"]
    assert entry["worker"] == "OrdersWorker" and entry["queued"] is None and entry["busy"]["id"] == "a/../b"


def test_the_api_search_finds_nothing_with_an_empty_list_and_refuses_a_bad_id(client, runtime):
    OrdersWorker.perform_async([{"id": "present"}])
    nothing = client.get(API + "/search", query_string={"id": XSS})
    assert nothing.status_code == 200 and nothing.get_json() == {
        "id": XSS, "found": [], "history": [], "searched": {"from": 0, "workers": 2, "of": 2, "continue": None}}
    for query in ({}, {"id": ""}, {"id": "x" * 10_001}):
        refused = client.get(API + "/search", query_string=query)
        assert refused.status_code == 400 and refused.get_json()["error"], query
    assert client.get(API + "/search", query_string={"id": "x" * 10_000}).get_json()["found"] == []
