"""Find a job by id from the header: every worker searched, one worker goes straight to the job page."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

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
