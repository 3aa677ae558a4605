"""HTTP details of the console: Allow on every 405, bodyless API posts (and what still keeps
cross-site posts out), and an X-Forwarded-Prefix that must be a plain path."""

from __future__ import annotations

import pytest
from webui_support import WORKERS, OrdersWorker, counts, host_app, make_dead

import lowkiq
from lowkiq.store import audit, pausing, registry
from lowkiq.webui import create_app
from lowkiq.webui.openapi import document
from lowkiq.webui.proxy import safe_prefix


@pytest.fixture(autouse=True)
def registered(runtime) -> None:
    """The standalone console finds workers in the registry that servers and clients keep."""
    registry.register(runtime.client, [OrdersWorker])


def standalone(redis_url: str, **env: str):
    return create_app(environ={"LOWKIQ_REDIS_URL": redis_url, **env}).test_client()


# ---- 405: Allow ---------------------------------------------------------------------------


def allowed(reply) -> set[str]:
    return {method.strip() for method in reply.headers["Allow"].split(",")}


@pytest.mark.parametrize("mounted", [False, True])
def test_every_405_names_the_methods_allowed(redis_url, runtime, mounted):
    client, prefix = (host_app().test_client(), "/lowkiq") if mounted else (standalone(redis_url), "")
    cases = {
        ("DELETE", "/api/v1/stats"): {"GET", "HEAD", "OPTIONS"},
        ("POST", "/api/v1/stats"): {"GET", "HEAD", "OPTIONS"},
        ("PUT", "/"): {"GET", "HEAD", "OPTIONS"},
        ("GET", "/api/v1/workers/OrdersWorker/morgue/delete_all"): {"POST", "OPTIONS"},
        ("GET", "/workers/OrdersWorker/pause"): {"POST", "OPTIONS"},
        ("PATCH", "/api/v1/workers/OrdersWorker/pause"): {"POST", "OPTIONS"},
    }
    for (method, path), methods in cases.items():
        reply = client.open(prefix + path, method=method)
        assert reply.status_code == 405, (method, path)
        assert allowed(reply) == methods, (method, path, reply.headers.get("Allow"))
    if not mounted:  # the console's own 405, not werkzeug's page
        reply = client.delete("/api/v1/stats")
        assert reply.get_json() == {"error": "DELETE is not allowed on /api/v1/stats"}
        assert reply.headers["Content-Security-Policy"]
        page = client.put("/")
        assert "PUT is not allowed on /" in page.get_data(as_text=True) and page.mimetype == "text/html"


# ---- bodyless posts -----------------------------------------------------------------------


def optional_body_posts() -> list[str]:
    """Every POST whose request body the OpenAPI document marks optional, with a worker and a schedule filled in."""
    found = []
    for path, item in document("/", basic_auth=False)["paths"].items():
        post = item.get("post")
        if post is not None and post.get("requestBody", {}).get("required") is False:
            found.append(path.replace("{worker}", "OrdersWorker").replace("{name}", "hourly").replace("{group}", "acme"))
    return sorted(found)


def test_twelve_posts_take_an_optional_body():
    assert [p.removeprefix("/api/v1/") for p in optional_body_posts()] == [
        "schedules/hourly/pause", "schedules/hourly/resume", "schedules/hourly/run",
        *(f"workers/OrdersWorker/{action}" for action in (
            "delete_failed", "groups/acme/pause", "groups/acme/resume", "kill_failed", "morgue/delete_all",
            "morgue/requeue_all", "pause", "perform_all_now", "resume"))]


@pytest.fixture
def scheduled(configure):
    """The console's workers, and a schedule of OrdersWorker for the schedules' actions."""
    return configure(workers=WORKERS, schedules=[lowkiq.Schedule("hourly", OrdersWorker, every=3600)])


@pytest.mark.parametrize("path", optional_body_posts())
def test_a_post_with_no_body_and_no_content_type_is_taken(scheduled, path):
    runtime = scheduled
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = host_app().test_client()
    reply = client.post("/lowkiq" + path)  # what `curl -X POST` sends: no Content-Type, no body
    assert reply.status_code == 200, reply.get_data(as_text=True)
    assert set(reply.get_json()) in ({"count"}, {"paused", "changed"}, {"schedule", "paused", "changed"},
                                     {"group", "paused", "changed"},
                                     {"schedule", "enqueued", "scheduled_at"})
    [entry] = audit.read(runtime.client, 1)
    assert entry.source == "api"


@pytest.mark.parametrize("path", optional_body_posts())
def test_a_bodyless_post_from_another_site_is_still_refused(scheduled, path):
    runtime = scheduled
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = host_app().test_client()
    refusals = {
        # What a page elsewhere gets with fetch(url, {method: "POST", mode: "no-cors"}) or sendBeacon(url).
        "Sec-Fetch-Site: cross-site": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        "Sec-Fetch-Site: same-site": {"Sec-Fetch-Site": "same-site"},
        "Origin: https://evil.example": {"Origin": "https://evil.example"},
        "Origin: null": {"Origin": "null"},
        # A browser too old to send either still named the page it posted from.
        "Referer: https://evil.example/": {"Referer": "https://evil.example/page"},
        "Referer: garbage": {"Referer": "not a url"},
    }
    for shown, headers in refusals.items():
        reply = client.post("/lowkiq" + path, headers=headers)
        assert reply.status_code == 403, shown
        assert reply.get_json()["error"].startswith("Cross-"), shown
    # A form posted from anywhere always has a type (even with no field), and never this one.
    for content_type in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"):
        reply = client.post("/lowkiq" + path, data="", content_type=content_type)
        assert reply.status_code == 415 and "application/json" in reply.get_json()["error"], content_type
    # A body without a type is not bodyless.
    assert client.post("/lowkiq" + path, data="{}").status_code == 415
    assert counts(runtime, OrdersWorker) == (0, 1) and pausing.paused(runtime.client) == {}
    assert audit.read(runtime.client) == []
    # From the console's own pages: the same post is taken.
    own = client.post("/lowkiq" + path, headers={"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost",
                                                 "Referer": "http://localhost/lowkiq/"})
    assert own.status_code == 200


def test_a_bodyless_post_to_an_action_that_needs_ids_says_so(client, runtime):
    reply = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/requeue")
    assert reply.status_code == 400 and '{"ids": ["1", "2"]}' in reply.get_json()["error"]


def test_bodyless_posts_are_refused_in_read_only_mode(runtime):
    client = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    reply = client.post("/lowkiq/api/v1/workers/OrdersWorker/perform_all_now")
    assert reply.status_code == 403 and reply.get_json() == {"error": "The console is read-only."}


# ---- X-Forwarded-Prefix -------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "/", "/jobs", "/ops/jobs/", "/ops/j%C3%B6bs", "/a-b_c.d~e:f@g"])
def test_a_plain_path_is_a_safe_prefix(prefix):
    assert safe_prefix(prefix)


@pytest.mark.parametrize("prefix", [
    "//evil.example", "///evil.example", "/ops//jobs", "https://evil.example", "evil.example", "jobs",
    "/\\evil.example", "\\\\evil.example", "/a/../..", "/..", "/.", "/a/./b", "/%2e%2e/x", "/%2F%2Fevil.example",
    "/a%5cb", "/a\x00b", "/a\nb", "/a\tb", "/a b", "/a?b=1", "/a#b", "/\u00e9",
])
def test_anything_else_is_not(prefix):
    assert not safe_prefix(prefix)


@pytest.mark.slow
def test_a_forwarded_prefix_that_is_not_a_path_never_becomes_a_link_or_a_redirect(redis_url, runtime):
    client = standalone(redis_url, LOWKIQ_WEB_PROXIES="1")
    good = client.get("/workers/OrdersWorker/enqueued", headers={"X-Forwarded-Prefix": "/ops/jobs"})
    assert good.status_code == 200 and 'href="/ops/jobs/servers"' in good.get_data(as_text=True)
    for bad in ("//evil.example", "/ops/../..", "https://evil.example", "/a\\b", "/%2F%2Fevil.example"):
        for path in ("/", "/workers/OrdersWorker", "/api/v1/stats", "/nothing"):
            reply = client.get(path, headers={"X-Forwarded-Prefix": bad})
            body = reply.get_data(as_text=True)
            assert reply.status_code == 400, (bad, path, reply.status_code)
            assert "X-Forwarded-Prefix" in body and "fix the proxy" in body
            assert "Location" not in reply.headers
            assert "evil.example/" not in body.replace("X-Forwarded-Prefix", "")  # no link leads there
    # The value the trusted (nearest) proxy added is the one that counts: a client's own is ignored.
    two = standalone(redis_url, LOWKIQ_WEB_PROXIES="2")
    assert two.get("/", headers={"X-Forwarded-Prefix": "/ops, //evil.example, /jobs"}).status_code == 400
    reply = two.get("/", headers={"X-Forwarded-Prefix": "//evil.example, /ops, /jobs"})
    assert reply.status_code == 200 and 'href="/ops/servers"' in reply.get_data(as_text=True)
    # Without a declared proxy the header is not read at all.
    assert standalone(redis_url).get("/", headers={"X-Forwarded-Prefix": "//evil.example"}).status_code == 200
