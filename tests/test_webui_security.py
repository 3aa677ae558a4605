"""CSRF, origin checks, headers, basic auth and read-only mode."""

from __future__ import annotations

import base64
import json

from lowkiq.queue.keys import webui_secret_string
from lowkiq.webui import create_app
from webui_support import (  # noqa: F401 - fixtures
    OrdersWorker,
    app,
    client,
    counts,
    csrf,
    host_app,
    make_dead,
    runtime,
)

W = "/lowkiq/workers/OrdersWorker"


def test_form_post_without_or_with_a_wrong_token_is_refused(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}, {"id": 2}])
    token = csrf(client, W + "/morgue")
    tampered = token[:-1] + ("1" if token[-1] == "0" else "0")  # one character off, never the token itself
    for data in ({}, {"csrf_token": ""}, {"csrf_token": "0" * 64}, {"csrf_token": tampered}):
        reply = client.post(W + "/morgue/delete_all", data=data)
        assert reply.status_code == 403
        assert b"security token" in reply.data
    assert counts(runtime, OrdersWorker) == (0, 2)
    assert client.post(W + "/morgue/delete_all", data={"csrf_token": token}).status_code == 303
    assert counts(runtime, OrdersWorker) == (0, 0)


def test_token_is_bound_to_the_browser_cookie(app, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    victim, attacker = app.test_client(), app.test_client()
    attacker_token = csrf(attacker, W + "/morgue")
    csrf(victim, W + "/morgue")
    assert victim.post(W + "/morgue/delete_all", data={"csrf_token": attacker_token}).status_code == 403
    fresh = app.test_client()  # no cookie at all
    assert fresh.post(W + "/morgue/delete_all", data={"csrf_token": attacker_token}).status_code == 403
    assert counts(runtime, OrdersWorker) == (0, 1)


def test_csrf_cookie_is_httponly_strict_and_scoped_to_the_prefix(client):
    reply = client.get(W + "/morgue")
    cookie = reply.headers["Set-Cookie"]
    assert cookie.startswith("lowkiq_csrf=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/lowkiq/" in cookie


def test_cross_site_requests_are_refused(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    token = csrf(client, W + "/morgue")
    for site in ("cross-site", "same-site"):
        form = client.post(W + "/morgue/delete_all", data={"csrf_token": token}, headers={"Sec-Fetch-Site": site})
        api = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete_all", data="{}",
                          content_type="application/json", headers={"Sec-Fetch-Site": site})
        assert form.status_code == 403 and api.status_code == 403
        assert "Cross-site" in api.get_json()["error"]
    assert counts(runtime, OrdersWorker) == (0, 1)
    same = client.post(W + "/morgue/delete_all", data={"csrf_token": token}, headers={"Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 303


def test_strict_headers_on_pages_and_json(client):
    for path in ("/lowkiq/", W + "/morgue", "/lowkiq/api/v1/stats", W + "/jobs/none"):
        reply = client.get(path)
        csp = reply.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
        assert reply.headers["Cache-Control"] == "no-store"


def test_pages_have_no_inline_script(client):
    html = client.get(W + "/morgue").get_data(as_text=True)
    assert "<script>" not in html and "onclick" not in html and "onsubmit" not in html and "style=" not in html


def test_host_app_pages_are_left_alone(app, client):
    @app.get("/hello")
    def hello():
        return "hi"

    reply = client.get("/hello")
    assert "Content-Security-Policy" not in reply.headers


def test_read_only_hides_and_refuses_every_action(runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    for path in (W + "/morgue", W + "/enqueued", W + "/jobs/1", "/lowkiq/"):
        html = client.get(path).get_data(as_text=True)
        assert 'method="post"' not in html, path
    assert "read-only" in client.get("/lowkiq/").get_data(as_text=True)
    refused = client.post(W + "/morgue/delete_all", data={})
    assert refused.status_code == 403 and b"read-only" in refused.data
    api = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete_all", data="{}", content_type="application/json")
    assert api.status_code == 403 and api.get_json() == {"error": "The console is read-only."}
    assert counts(runtime, OrdersWorker) == (0, 1)
    assert client.get("/lowkiq/api/v1/stats").status_code == 200


def auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_standalone_basic_auth(redis_url, runtime):
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "s3cret"})
    client = app.test_client()
    for path in ("/", "/api/v1/stats", "/lowkiq-static/lowkiq.css", "/workers/OrdersWorker/morgue"):
        reply = client.get(path)
        assert reply.status_code == 401, path
        assert reply.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert client.get("/", headers=auth("admin", "wrong")).status_code == 401
    assert client.get("/", headers=auth("root", "s3cret")).status_code == 401
    assert client.get("/", headers={"Authorization": "Basic !!!"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 401
    assert client.get("/", headers=auth("admin", "s3cret")).status_code == 200
    assert client.get("/api/v1/stats", headers=auth("admin", "s3cret")).status_code == 200
    assert client.get("/api/v1/stats").get_json() == {"error": "authentication required"}
    custom = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "p", "LOWKIQ_WEB_USER": "ops"})
    assert custom.test_client().get("/", headers=auth("ops", "p")).status_code == 200


def test_standalone_without_password_is_open(redis_url, runtime):
    assert create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client().get("/").status_code == 200


def test_standalone_read_only_from_environment(redis_url, runtime):
    OrdersWorker.perform_async([{"id": 1}])  # registers the worker in Redis
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_READONLY": "1"}).test_client()
    assert 'method="post"' not in client.get("/workers/OrdersWorker/enqueued").get_data(as_text=True)
    reply = client.post("/api/v1/workers/OrdersWorker/perform_all_now", data="{}", content_type="application/json")
    assert reply.status_code == 403


def test_processes_share_the_csrf_secret_through_redis(redis_url, runtime, r):
    """Two gunicorn workers are two apps: a token from one is good at the other."""
    OrdersWorker.perform_async([{"id": 1}])
    one = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    two = create_app(environ={"LOWKIQ_REDIS_URL": redis_url})
    token = csrf(one, "/workers/OrdersWorker/morgue")
    cookie = one.get_cookie("lowkiq_csrf").value
    other = two.test_client()
    other.set_cookie("lowkiq_csrf", cookie)
    assert other.post("/workers/OrdersWorker/perform_all_now", data={"csrf_token": token}).status_code == 303
    assert len(r.get(webui_secret_string())) == 64


def test_configured_secret_key_is_used(redis_url, runtime, r):
    OrdersWorker.perform_async([{"id": 1}])
    one = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_SECRET_KEY": "k1"}).test_client()
    token = csrf(one, "/workers/OrdersWorker/morgue")
    assert r.get(webui_secret_string()) is None
    other_key = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_SECRET_KEY": "k2"}).test_client()
    other_key.set_cookie("lowkiq_csrf", one.get_cookie("lowkiq_csrf").value)
    assert other_key.post("/workers/OrdersWorker/perform_all_now", data={"csrf_token": token}).status_code == 403


def test_unknown_api_route_is_json_404(redis_url, runtime):
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    reply = client.get("/api/v1/nothing")
    assert reply.status_code == 404 and "no such endpoint" in reply.get_json()["error"]
    assert client.delete("/api/v1/stats").status_code == 405


def test_json_bodies_are_not_sniffable_html(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "<b>x</b>", "payload": "<script>"}])
    reply = client.get("/lowkiq/api/v1/workers/OrdersWorker/morgue")
    assert reply.mimetype == "application/json" and reply.headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(reply.data)["jobs"][0]["payloads"][0][0] == "<script>"
