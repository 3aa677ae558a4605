"""Pause and resume from the console's pages: the button, the banner, the dashboard's mark, the audit log."""

from __future__ import annotations

from test_webui_prometheus import beat
from webui_support import OrdersWorker, csrf, host_app

from lowkiq.store import audit, pausing

W = "/lowkiq/workers/OrdersWorker"


def counts(client, page: str = W + "/enqueued") -> str:
    """The tab counts as htmx loads them after ``page``, with the pause banner and button out of band."""
    return client.get(W + "/_counts?tab=enqueued", headers={"HX-Request": "true",
                                                            "HX-Current-URL": f"http://localhost{page}"}).get_data(True)


def test_pause_from_the_worker_page_then_resume(client, runtime):
    OrdersWorker.perform_async([{"id": "1"}])
    page = W + "/morgue?order_by=id&min=a"
    before = counts(client, page)
    assert 'data-pause="pause"' in before and "<strong>Paused.</strong>" not in before
    assert f'name="next" value="{page.replace("&", "&amp;")}"' in before  # the form returns to the page it is on

    token = csrf(client, W + "/enqueued")
    done = client.post(W + "/pause", data={"csrf_token": token, "next": page})
    assert (done.status_code, done.headers["Location"]) == (303, page)
    assert b"Paused OrdersWorker: servers stop taking its jobs within a second" in client.get(page).data
    assert pausing.paused(runtime.client).keys() == {OrdersWorker.queue_name}

    after = counts(client, page)
    assert "<strong>Paused.</strong>" in after and 'data-pause="resume"' in after and "(console)" in after
    row = client.get("/lowkiq/").data.split(b'data-worker="OrdersWorker"')[1].split(b"</tr>")[0]
    assert b"data-paused" in row
    OrdersWorker.perform_async([{"id": "2"}])  # producers are not paused

    client.post(W + "/resume", data={"csrf_token": token})
    assert pausing.paused(runtime.client) == {}
    assert 'data-pause="pause"' in counts(client)
    assert [(e.action, e.source, e.scope) for e in audit.read(runtime.client)] == [
        ("resume", "console", f"queue {OrdersWorker.queue_name} resumed"),
        ("pause", "console", f"queue {OrdersWorker.queue_name} paused")]


def test_a_paused_queue_with_due_work_is_not_reported_unserved(client, runtime):
    OrdersWorker.perform_async([{"id": "1", "perform_in": 0}])
    beat(runtime.client, "a-server", {})  # alive, holding none of OrdersWorker's shards
    assert b'id="unserved"' in client.get("/lowkiq/").data
    pausing.pause(runtime.client, OrdersWorker.queue_name, worker="OrdersWorker", who="ops", source="cli")
    dashboard = client.get("/lowkiq/").get_data(True)
    assert 'title="Paused by ops: servers take none of its jobs">paused<' in dashboard
    assert 'id="unserved"' not in dashboard


def test_read_only_shows_no_button_and_refuses_the_post(runtime):
    readonly = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    assert "data-pause" not in counts(readonly)
    assert readonly.post(W + "/pause").status_code == 403
    assert pausing.paused(runtime.client) == {}


def test_a_post_without_csrf_is_refused(client, runtime):
    assert client.post(W + "/pause").status_code in (400, 403)
    assert pausing.paused(runtime.client) == {}


def test_the_api_takes_no_body_or_an_empty_object_as_json(client, runtime):
    """As the OpenAPI document says, the body is optional: none at all (no Content-Type either, as
    ``curl -X POST`` sends), or JSON. What keeps cross-site posts out is in webui/security.py; a form's
    type, even with nothing in it, is still refused."""
    api = "/lowkiq/api/v1/workers/OrdersWorker"
    form = client.post(f"{api}/pause", data="", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415 and "application/json" in form.get_json()["error"]
    assert pausing.paused(runtime.client) == {}
    assert audit.read(runtime.client) == []
    assert client.post(f"{api}/pause").get_json() == {"paused": True, "changed": True}
    assert client.post(f"{api}/resume").get_json() == {"paused": False, "changed": True}
    assert client.post(f"{api}/pause", content_type="application/json").get_json() == {"paused": True, "changed": True}
    assert pausing.paused(runtime.client).keys() == {OrdersWorker.queue_name}
    assert client.post(f"{api}/resume", data="{}", content_type="application/json").get_json() == {
        "paused": False, "changed": True}
    assert pausing.paused(runtime.client) == {}
