"""Export of the morgue or the queue, filter applied, as JSON Lines or CSV, streamed in chunks."""

from __future__ import annotations

import csv
import html
import io
import json
import re

from webui_support import OrdersWorker, make_dead

W = "/lowkiq/workers/OrdersWorker"


def test_the_morgue_exports_exactly_the_filtered_jobs_as_json_lines(client, runtime, monkeypatch):
    from lowkiq.webui import export

    monkeypatch.setattr(export, "EXPORT_CHUNK", 4)  # several chunks
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i:02}", "payload": {"n": i, "html": "<b>x</b>"}} for i in range(30)],
              error=b"KeyError: 'customer_id'")
    page = client.get(W + "/morgue?order_by=id&min=job-05&max=job-14").get_data(as_text=True)
    assert "Export matching:" in page
    reply = client.get(W + "/morgue/export?format=jsonl&order_by=id&min=job-05&max=job-14")
    assert reply.status_code == 200 and reply.mimetype == "application/x-ndjson"
    assert reply.headers["Content-Disposition"].startswith('attachment; filename="OrdersWorker-dead-')
    rows = [json.loads(line) for line in reply.get_data(as_text=True).splitlines()]
    assert [r["id"] for r in rows] == [f"job-{i:02}" for i in range(5, 15)]
    assert rows[0]["payloads"][0][0] == {"n": 5, "html": "<b>x</b>"} and rows[0]["error"] == "KeyError: 'customer_id'"
    assert set(rows[0]) == {"id", "payloads", "updated_at", "error"}


def test_the_queue_exports_as_csv_with_formulas_defused(client, runtime):
    OrdersWorker.perform_async([{"id": "a", "payload": "=HYPERLINK(\"http://evil\")"}, {"id": "b", "payload": [1, 2]},
                                {"id": "@c", "payload": "plain"}])
    reply = client.get(W + "/enqueued/export?format=csv&order_by=id")
    assert reply.mimetype == "text/csv"
    rows = list(csv.reader(io.StringIO(reply.get_data(as_text=True))))
    assert rows[0] == ["id", "payloads", "perform_in", "retry_count", "error", "clipped"]
    by_id = {row[0]: row for row in rows[1:]}
    assert set(by_id) == {"a", "b", "'@c"}  # an id a spreadsheet would run as a formula is quoted
    assert json.loads(by_id["b"][1])[0][0] == [1, 2] and by_id["b"][3] == "-1" and by_id["b"][4] == "" and by_id["b"][5] == ""
    assert by_id["a"][1].startswith('[["=HYPERLINK')  # inside a JSON array: never the first character of a cell


def test_an_empty_view_and_a_bad_request(client, runtime):
    assert client.get(W + "/enqueued/export?format=jsonl").get_data(as_text=True) == ""
    assert "id,payloads,perform_in" in client.get(W + "/enqueued/export?format=csv").get_data(as_text=True)
    bad = client.get(W + "/enqueued/export?format=xlsx")
    assert bad.status_code == 400 and b"format must be one of jsonl, csv" in bad.data
    assert client.get(W + "/morgue/export?order_by=perform_in").status_code == 400
    assert client.get("/lowkiq/workers/Nope/morgue/export").status_code == 404


def test_a_redis_failure_midway_ends_the_file_with_a_line_saying_so(client, runtime, monkeypatch):
    import redis

    from lowkiq.store.queries import Queries
    from lowkiq.webui import export

    monkeypatch.setattr(export, "EXPORT_CHUNK", 2)
    make_dead(runtime, OrdersWorker, [{"id": f"j{i}"} for i in range(6)])
    real = Queries.morgue_jobs
    calls = []

    def failing_on_the_second_chunk(self, ids, **caps):
        calls.append(ids)
        if len(calls) == 2:
            raise redis.ConnectionError("Connection reset by peer")
        return real(self, ids, **caps)

    monkeypatch.setattr(Queries, "morgue_jobs", failing_on_the_second_chunk)
    lines = [json.loads(x) for x in client.get(W + "/morgue/export?order_by=id").get_data(as_text=True).splitlines()]
    assert [line.get("id") for line in lines[:2]] == ["j0", "j1"]
    assert lines[-1]["error"].startswith("export stopped: Redis failed (ConnectionError: Connection reset by peer)")


def test_an_export_with_a_content_filter_holds_what_the_page_shows(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i:02}", "payload": {"to": f"user{i}@example.com"}} for i in range(12)],
              error=b"KeyError: 'customer_id'")
    make_dead(runtime, OrdersWorker, [{"id": "late", "payload": {"to": "late@example.org"}}],
              error=b"TimeoutError: mailbox did not answer")
    query = "payload=example.com&order_by=id&min=job-03"
    exported = client.get(W + "/morgue/export?format=jsonl&" + query)
    assert exported.status_code == 200
    rows = [json.loads(line) for line in exported.get_data(as_text=True).splitlines()]
    assert sorted(r["id"] for r in rows) == [f"job-{i:02}" for i in range(3, 12)]
    # The page offers that export: its link carries the page's filters.
    shown = client.get(W + "/morgue?" + query).get_data(as_text=True)
    links = re.findall(r'href="([^"]*/morgue/export\?[^"]*format=jsonl[^"]*)"', shown)
    assert len(links) == 1 and "payload=example.com" in links[0]
    assert client.get(html.unescape(links[0])).get_data() == exported.get_data()
    # The content filters one by one, as the page and the API take them, in CSV too.
    reply = client.get(W + "/morgue/export?format=csv&error_class=TimeoutError")
    assert [row[0] for row in csv.reader(io.StringIO(reply.get_data(as_text=True)))] == ["id", "late"]
    assert client.get(W + "/morgue/export?format=jsonl&error=nowhere").get_data(as_text=True) == ""
    assert client.get(W + "/morgue/export?payload=" + "x" * 201).status_code == 400
