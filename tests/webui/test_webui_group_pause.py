"""Pausing one group from the console and the API (docs/fairness.md, "Pausing a group"): the button on the worker
page's groups table, the API's pause/resume, the audit entry with the verified identity, read-only, CSRF, bad
names, escaping."""

from __future__ import annotations

from webui_support import OrdersWorker, csrf, host_app

from lowkiq.store import audit, group_pausing

W = "/lowkiq/workers/OrdersWorker"
API = "/lowkiq/api/v1/workers/OrdersWorker"


def counts(client) -> str:
    return client.get(W + "/_counts?tab=enqueued", headers={"HX-Request": "true",
                                                            "HX-Current-URL": f"http://localhost{W}/enqueued"}).get_data(True)


def paused(runtime) -> set[str]:
    return set(group_pausing.paused_groups(runtime.client, OrdersWorker.keys()))


def test_pause_a_group_from_the_worker_page_then_resume(client, runtime, clock):
    OrdersWorker.perform_async([{"id": f"a{i}", "group": "acme", "perform_in": clock() - 5} for i in range(3)]
                               + [{"id": "b", "group": "<b>bolt</b>"}])
    before = counts(client)
    assert 'data-group-action="pause"' in before and "data-group-paused" not in before
    assert "&lt;b&gt;bolt&lt;/b&gt;" in before and "<b>bolt" not in before
    token = csrf(client, W + "/enqueued")
    done = client.post(W + "/groups/acme/pause", data={"csrf_token": token, "next": W + "/enqueued"})
    assert (done.status_code, done.headers["Location"]) == (303, W + "/enqueued")
    assert b"Paused group acme of OrdersWorker" in client.get(W + "/enqueued").data
    assert paused(runtime) == {"acme"}
    after = counts(client)
    state = after[after.index('data-group-state="acme"'):]
    state = state[:state.index("</td>")]
    assert "data-group-paused" in state and 'data-group-action="resume"' in state
    client.post(W + "/groups/acme/resume", data={"csrf_token": token})
    assert paused(runtime) == set()
    assert [(e.action, e.source, e.worker, e.scope) for e in audit.read(runtime.client)] == [
        ("group/resume", "console", "OrdersWorker", "group acme resumed"),
        ("group/pause", "console", "OrdersWorker", "group acme paused")]


def test_a_paused_group_with_nothing_queued_is_still_listed(client, runtime):
    OrdersWorker.perform_async([{"id": "x", "group": "zeta"}])
    client.post(API + "/groups/idle/pause")
    row = counts(client)
    assert 'data-group-state="idle"' in row and 'data-group-state="zeta"' in row


def test_the_api_pauses_and_resumes_and_audits_the_verified_user(runtime):
    app = host_app(LOWKIQ_WEB_CURRENT_USER=lambda: "alice")
    client = app.test_client()
    assert client.post(API + "/groups/acme/pause").get_json() == {"group": "acme", "paused": True, "changed": True}
    assert client.post(API + "/groups/acme/pause").get_json() == {"group": "acme", "paused": True, "changed": False}
    listed = client.get(API + "/groups").get_json()
    assert listed["groups"][0]["group"] == "acme" and listed["groups"][0]["paused"]["who"] == "alice"
    assert client.post(API + "/groups/acme/resume").get_json() == {"group": "acme", "paused": False, "changed": True}
    entries = audit.read(runtime.client)
    assert [(e.action, e.who, e.source, e.scope) for e in entries] == [
        ("group/resume", "alice", "api", "group acme resumed"),
        ("group/pause", "alice", "api", "group acme was paused already"),
        ("group/pause", "alice", "api", "group acme paused")]


def test_read_only_shows_no_button_and_refuses_the_posts(runtime):
    OrdersWorker.perform_async([{"id": "x", "group": "acme"}])
    readonly = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    assert "data-group-action" not in counts(readonly)
    assert readonly.post(API + "/groups/acme/pause").status_code == 403
    assert readonly.post(W + "/groups/acme/pause").status_code == 403
    assert paused(runtime) == set()
    assert audit.read(runtime.client) == []


def test_a_post_without_csrf_is_refused(client, runtime):
    assert client.post(W + "/groups/acme/pause").status_code in (400, 403)
    assert paused(runtime) == set()


def test_a_bad_group_or_worker_is_refused_naming_it(client, runtime):
    answer = client.post(API + "/groups/(other)/pause")
    assert answer.status_code == 400 and "reserved" in answer.get_json()["error"]
    assert client.post("/lowkiq/api/v1/workers/Nobody/groups/acme/pause").status_code == 404
    assert paused(runtime) == set()
    assert audit.read(runtime.client) == []
