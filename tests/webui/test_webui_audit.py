"""Every console and API action is recorded with who did it; the Audit page lists them, escaped."""

from __future__ import annotations

import base64
import json
import re

from webui_support import XSS, OrdersWorker, csrf, host_app, make_dead

from lowkiq.store import audit
from lowkiq.webui import create_app

W = "/lowkiq/workers/OrdersWorker"


def test_a_form_action_is_recorded_with_the_host_apps_user(runtime):
    app = host_app(LOWKIQ_WEB_CURRENT_USER=lambda: "alice@example.com")
    client = app.test_client()
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(4)])
    token = csrf(client, W + "/morgue")
    client.post(W + "/morgue/requeue", data={"csrf_token": token, "ids": ["0", "1", "9"], "next": W + "/morgue"})
    client.post(W + "/morgue/delete_all", data={"csrf_token": token, "next": W + "/morgue"})
    first, started, ended = reversed(audit.read(runtime.client))
    assert (first.who, first.source, first.action, first.worker, first.count, first.ids) == (
        "alice@example.com", "console", "morgue/requeue", "OrdersWorker", 2, ["0", "1", "9"])
    # An action on a whole area is recorded when it starts and when it ends.
    assert (started.who, started.action, started.count, started.scope) == (
        "alice@example.com", "morgue/delete_all", 0, "all: started")
    assert (ended.action, ended.count, ended.scope) == ("morgue/delete_all", 2, "all")


def test_an_api_action_is_recorded_and_anonymous_without_a_user(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "x"}])
    reply = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete", data=json.dumps({"ids": ["x"]}),
                        content_type="application/json")
    assert reply.get_json() == {"count": 1}
    [entry] = audit.read(runtime.client)
    assert (entry.source, entry.action, entry.count) == ("api", "morgue/delete", 1)
    assert entry.who.startswith("anonymous (")


def test_the_basic_auth_user_is_recorded_and_the_page_escapes_what_it_shows(redis_url, runtime):
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "pw", "LOWKIQ_WEB_USER": "ops"})
    client = app.test_client()
    headers = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
    make_dead(runtime, OrdersWorker, [{"id": XSS}])
    reply = client.post("/api/v1/workers/OrdersWorker/morgue/requeue", data=json.dumps({"ids": [XSS]}),
                        content_type="application/json", headers=headers)
    assert reply.get_json() == {"count": 1}
    audit.record(runtime.client, who=XSS, source="cli", action="morgue/delete", worker="OrdersWorker", count=0)
    page = client.get("/audit", headers=headers)
    assert page.status_code == 200
    assert XSS.encode() not in page.data and b"&lt;script&gt;" in page.data
    assert b">ops<" in page.data and b"morgue/requeue" in page.data
    assert client.get("/audit").status_code == 401


def test_the_audit_list_is_capped_and_reads_an_unreadable_entry(runtime, r):
    for i in range(5):
        audit.record(runtime.client, who="bot", source="cli", action="morgue/delete", worker="W", count=i)
    r.lpush(audit.AUDIT_KEYS.audit_list, "garbage")
    entries = audit.read(runtime.client, 3)
    assert [e.action for e in entries] == ["unreadable entry", "morgue/delete", "morgue/delete"]
    assert [e.count for e in entries[1:]] == [4, 3]
    old_keep = audit.AUDIT_KEEP
    audit.AUDIT_KEEP = 4
    try:
        audit.record(runtime.client, who="bot", source="cli", action="morgue/delete", worker="W", count=9)
    finally:
        audit.AUDIT_KEEP = old_keep
    assert r.llen(audit.AUDIT_KEYS.audit_list) == 4


def test_the_audit_api_lists_the_newest_first_and_checks_its_limit(client, runtime):
    for count in (1, 2, 3):
        audit.record(runtime.client, who="bot", source="cli", action="morgue/delete", worker="OrdersWorker", count=count)
    reply = client.get("/lowkiq/api/v1/audit?limit=2")
    assert reply.status_code == 200
    entries = reply.get_json()["entries"]
    assert [e["count"] for e in entries] == [3, 2] and entries[0]["who"] == "bot" and entries[0]["source"] == "cli"
    for bad in ("0", "1001", "x", "-1"):
        refused = client.get("/lowkiq/api/v1/audit", query_string={"limit": bad})
        assert refused.status_code == 400 and "limit" in refused.get_json()["error"]


def test_the_page_gives_each_action_s_absolute_time_and_tells_ids_apart(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "with space"}, {"id": "two"}])
    assert client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete", data=json.dumps({"ids": ["with space", "two"]}),
                       content_type="application/json").get_json() == {"count": 2}
    page = client.get("/lowkiq/audit").get_data(as_text=True)
    row = page.split('id="audit"')[1].split("</tr>")[1]
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d', row)  # an incident's timeline needs the time
    assert "<code>with space</code>, <code>two</code>" in row
