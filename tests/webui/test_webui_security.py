"""CSRF, origin checks, headers, basic auth and read-only mode."""

from __future__ import annotations

import base64
import json

import pytest
from webui_support import OrdersWorker, counts, csrf, host_app, make_dead

from lowkiq.store.keys import webui_secret_string
from lowkiq.webui import create_app

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


# ---- CSRF bound to a browser session, origins ----------------------------------------------


def test_a_cookie_the_console_did_not_sign_is_no_session(client, runtime):
    """The cookie was a bare random value: one planted by a sibling site was trusted as is."""
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client.set_cookie("lowkiq_csrf", "planted", path="/lowkiq/")
    page = client.get(W + "/morgue")
    assert "lowkiq_csrf=" in page.headers.get("Set-Cookie", ""), "a planted cookie must be replaced"
    issued = client.get_cookie("lowkiq_csrf", path="/lowkiq/").value
    sid, _, signature = issued.partition(".")
    assert sid and len(signature) == 64 and sid != "planted"
    token = csrf(client, W + "/morgue")
    client.set_cookie("lowkiq_csrf", f"{sid}.{'0' * 64}", path="/lowkiq/")  # right id, forged signature
    assert client.post(W + "/morgue/delete_all", data={"csrf_token": token}).status_code == 403
    client.set_cookie("lowkiq_csrf", issued, path="/lowkiq/")
    assert client.post(W + "/morgue/delete_all", data={"csrf_token": token}).status_code == 303


def test_in_a_host_with_sessions_logging_out_voids_the_token(runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    app = host_app(SECRET_KEY="host-secret")

    @app.post("/logout")
    def logout():
        from flask import session

        session.clear()
        return "bye"

    client = app.test_client()
    token = csrf(client, W + "/morgue")
    assert client.get_cookie("lowkiq_csrf", path="/lowkiq/") is None  # the host's session holds it
    client.post("/logout")
    assert client.post(W + "/morgue/delete_all", data={"csrf_token": token}).status_code == 403
    assert counts(runtime, OrdersWorker) == (0, 1)
    fresh = csrf(client, W + "/morgue")
    assert fresh != token
    assert client.post(W + "/morgue/delete_all", data={"csrf_token": fresh}).status_code == 303


def test_a_cross_origin_origin_header_is_refused_on_unsafe_requests(client, runtime):
    """Sec-Fetch-Site was the only check: a browser that does not send it could post cross-site."""
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    token = csrf(client, W + "/morgue")
    for origin in ("https://evil.example", "null", "http://localhost.evil.example", "http://localhost:81", "garbage"):
        form = client.post(W + "/morgue/delete_all", data={"csrf_token": token}, headers={"Origin": origin})
        api = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete_all", data="{}",
                          content_type="application/json", headers={"Origin": origin})
        assert form.status_code == 403 and api.status_code == 403, origin
        assert api.get_json()["error"] == f"Cross-origin request refused (Origin: {origin})."
    assert counts(runtime, OrdersWorker) == (0, 1)
    same = client.post(W + "/morgue/delete_all", data={"csrf_token": token}, headers={"Origin": "http://localhost"})
    assert same.status_code == 303


def test_trusted_origins_are_accepted(runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = host_app(LOWKIQ_WEB_TRUSTED_ORIGINS="https://ops.example.com").test_client()
    reply = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete_all", data="{}",
                        content_type="application/json", headers={"Origin": "https://ops.example.com"})
    assert reply.status_code == 200 and reply.get_json() == {"count": 1}


# ---- every response of the standalone app carries the headers ---------------------------------


def test_app_level_responses_carry_the_security_headers(redis_url, runtime):
    """401, 404, 405 and 308 came from the app, not the blueprint, and lacked CSP and the rest."""
    secured = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "p"}).test_client()
    open_app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    replies = {
        401: secured.get("/"),
        404: open_app.get("/nothing/here"),
        405: open_app.delete("/api/v1/stats"),
        308: open_app.get("/api//v1/stats"),
    }
    for status, reply in replies.items():
        assert reply.status_code == status
        assert "default-src 'none'" in reply.headers["Content-Security-Policy"], status
        assert "frame-ancestors 'none'" in reply.headers["Content-Security-Policy"], status
        assert reply.headers["X-Content-Type-Options"] == "nosniff", status
        assert reply.headers["Cache-Control"] == "no-store", status
        assert reply.headers["X-Frame-Options"] == "DENY", status
        assert reply.headers["Referrer-Policy"] == "same-origin", status
    assert open_app.get("/api/v1/nothing").get_json() == {"error": "no such endpoint: /api/v1/nothing"}
    assert open_app.delete("/api/v1/stats").get_json() == {"error": "DELETE is not allowed on /api/v1/stats"}


# ---- malformed input: a 400 that names the problem ------------------------------------------


API = "/lowkiq/api/v1/workers/OrdersWorker"


def test_json_nested_too_deeply_is_a_json_400(client):
    body = "[" * 100_000 + "]" * 100_000
    reply = client.post(API + "/morgue/delete", data=body, content_type="application/json")
    assert reply.status_code == 400 and reply.get_json() == {"error": "the body is nested too deeply"}


def test_ids_with_lone_surrogates_or_too_many_digits_are_a_json_400(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    reply = client.post(API + "/morgue/delete", data='{"ids": ["ok", "\\ud800"]}', content_type="application/json")
    assert reply.status_code == 400 and reply.get_json()["error"].startswith('"ids"[1] cannot be a job id')
    digits = '{"ids": [' + "9" * 5000 + "]}"
    reply = client.post(API + "/morgue/delete", data=digits, content_type="application/json")
    assert reply.status_code == 400 and "error" in reply.get_json()
    assert counts(runtime, OrdersWorker) == (0, 1)


@pytest.mark.parametrize("query, name", [
    ("order_by=perform_in&min=nan", "min"),
    ("order_by=perform_in&min=inf", "min"),  # -inf and +inf are Lowkiq's open bounds; +inf as min matches nothing
    ("order_by=perform_in&max=NaN", "max"),
    ("after=nan:x", "after"),
    ("before=inf:x", "before"),
])
def test_non_finite_bounds_and_cursors_are_a_400_naming_the_parameter(client, query, name):
    """min=nan answered 503 with the script's hash and line."""
    api = client.get(API + "/enqueued?" + query)
    assert api.status_code == 400 and api.get_json()["error"].startswith(name), api.data
    page = client.get(W + "/enqueued?" + query)
    assert page.status_code == 400 and name in page.get_data(as_text=True)
    assert "user_script" not in page.get_data(as_text=True)


def test_a_body_past_the_limit_is_a_clean_413(client):
    big = '{"ids": ["' + "x" * (1024 * 1024) + '"]}'
    api = client.post(API + "/morgue/delete", data=big, content_type="application/json")
    assert api.status_code == 413 and "1,048,576 bytes" in api.get_json()["error"]
    token = csrf(client, W + "/morgue")
    form = client.post(W + "/morgue/delete", data={"csrf_token": token, "ids": ["x" * (1024 * 1024)]})
    assert form.status_code == 413 and "larger than the console accepts" in form.get_data(as_text=True)
