"""examples/flask_app: an app factory that configures lowkiq from its config, enqueues from a route and mounts
the console behind the app's own sign-in, which names the operator in the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from examples_support import EXAMPLES, csrf_token, links, on_path
from redis_server import RedisServer
from werkzeug.security import generate_password_hash

import lowkiq

on_path("flask_app")


@pytest.fixture
def app(redis_server: RedisServer, r: redis.Redis) -> Iterator[Any]:
    from shop import create_app

    yield create_app({"TESTING": True, "LOWKIQ_REDIS_URL": redis_server.url,
                      "USERS": {"alice": generate_password_hash("wonderland")}})
    lowkiq.runtime._current = None


def sign_in(client: Any, name: str = "alice", password: str = "wonderland") -> None:
    reply = client.post("/login", data={"name": name, "password": password, "next": "/lowkiq/"})
    assert reply.status_code == 302 and reply.headers["Location"] == "/lowkiq/", reply.data


def signed_in(app: Any) -> Any:
    client = app.test_client()
    sign_in(client)
    return client


def test_the_factory_configures_lowkiq_from_the_flask_config(app: Any, redis_server: RedisServer) -> None:
    settings = lowkiq.current().settings
    assert settings.redis_url == redis_server.url
    assert [w.__name__ for w in settings.workers] == ["OrdersWorker"]


def test_a_route_enqueues(app: Any) -> None:
    from shop.workers import OrdersWorker

    from lowkiq.store.metrics import queue_metrics

    reply = app.test_client().post("/orders/42/sync", json={"total": 9})
    assert reply.status_code == 202 and reply.get_json() == {"enqueued": 1}
    [metrics] = queue_metrics(lowkiq.current().client, [OrdersWorker.keys()])
    assert metrics.length == 1
    job = lowkiq.current().queries(OrdersWorker).job("42")
    assert job is not None and [payload for payload, _score in job.payloads] == [{"total": 9}]
    bad = app.test_client().post("/orders/4%0A2/sync", json={})
    assert bad.status_code == 400 and "control character" in bad.get_json()["error"]


def test_the_console_answers_signed_in_users_and_sends_others_to_sign_in(app: Any) -> None:
    anonymous = app.test_client()
    for path in ("/lowkiq/", "/lowkiq/api/v1/stats", "/lowkiq/lowkiq-static/htmx.min.js"):
        reply = anonymous.get(path)
        assert reply.status_code == 302 and reply.headers["Location"].startswith("/login?next="), path
    assert anonymous.post("/login", data={"name": "alice", "password": "wrong"}).status_code == 401
    page = signed_in(app).get("/lowkiq/")
    assert page.status_code == 200 and b"Dashboard" in page.data
    found = links(page.get_data(as_text=True))
    assert found and all(link.startswith("/lowkiq/") for link in found), found


def test_an_action_from_the_console_is_audited_with_the_apps_user(app: Any) -> None:
    from shop.workers import OrdersWorker

    OrdersWorker.perform_async([{"id": 1}])
    client = signed_in(app)
    worker_page = "/lowkiq/workers/OrdersWorker/enqueued"
    token = csrf_token(client.get(worker_page).get_data(as_text=True))
    done = client.post("/lowkiq/workers/OrdersWorker/pause", data={"csrf_token": token, "next": worker_page})
    assert done.status_code == 303
    [entry] = client.get("/lowkiq/api/v1/audit").get_json()["entries"]
    assert (entry["who"], entry["action"], entry["source"]) == ("alice", "pause", "console")
    # Signing out clears the session the console keeps its form tokens in.
    client.post("/logout")
    sign_in(client)
    stale = client.post("/lowkiq/workers/OrdersWorker/resume", data={"csrf_token": token, "next": worker_page})
    assert stale.status_code == 403


def test_the_servers_app_file_configures_lowkiq_as_the_web_app_does(redis_server: RedisServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from lowkiq import app_file

    monkeypatch.setenv("LOWKIQ_REDIS_URL", redis_server.url)
    try:
        runtime = app_file.load(str(EXAMPLES / "flask_app" / "lowkiq_app.py"))
        assert runtime.settings.redis_url == redis_server.url
        assert [w.__name__ for w in runtime.settings.workers] == ["OrdersWorker"]
    finally:
        lowkiq.runtime._current = None
