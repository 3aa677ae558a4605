"""examples/fastapi_app: an endpoint that enqueues, tried through FastAPI's TestClient against a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from examples_support import EXAMPLES, on_path
from fastapi.testclient import TestClient
from redis_server import RedisServer

import lowkiq

on_path("fastapi_app")


@pytest.fixture
def client(redis_server: RedisServer, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from orders_api.main import app

    monkeypatch.setenv("LOWKIQ_REDIS_URL", redis_server.url)
    with TestClient(app) as client:  # runs the lifespan, which configures lowkiq
        yield client
    lowkiq.runtime._current = None


def queued(worker: Any, job_id: str) -> list[tuple[Any, float]]:
    job = lowkiq.current().queries(worker).job(job_id)
    return [] if job is None else job.payloads


def test_a_post_enqueues_the_version(client: TestClient, redis_server: RedisServer) -> None:
    from orders_api.workers import OrdersWorker

    assert lowkiq.current().settings.redis_url == redis_server.url
    reply = client.post("/orders/42/versions", json={"version": 3, "data": {"total": 9}})
    assert reply.status_code == 202 and reply.json() == {"enqueued": 1}
    client.post("/orders/42/versions", json={"version": 2, "data": {"total": 7}})
    assert queued(OrdersWorker, "42") == [({"total": 7}, 2.0), ({"total": 9}, 3.0)]


def test_a_payload_the_model_refuses_is_a_422(client: TestClient) -> None:
    reply = client.post("/orders/42/versions", json={"version": "third", "data": {}})
    assert reply.status_code == 422 and reply.json()["detail"][0]["loc"] == ["body", "version"]


def test_a_job_lowkiq_refuses_is_a_400_with_its_message(client: TestClient) -> None:
    from orders_api.workers import OrdersWorker

    reply = client.post("/orders/4%0A2/versions", json={"version": 1, "data": {}})
    assert reply.status_code == 400
    assert reply.json()["detail"].startswith("job 0: id '4\\n2' contains the control character '\\n'")
    too_large = client.post("/orders/42/versions", json={"version": 10**400, "data": {}})
    assert too_large.status_code == 400 and "score" in too_large.json()["detail"]
    assert queued(OrdersWorker, "42") == []


def test_the_servers_app_file_configures_the_same_workers(redis_server: RedisServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from orders_api.workers import OrdersWorker

    from lowkiq import app_file

    monkeypatch.setenv("LOWKIQ_REDIS_URL", redis_server.url)
    try:
        runtime = app_file.load(str(EXAMPLES / "fastapi_app" / "lowkiq_app.py"))
        assert runtime.settings.redis_url == redis_server.url
        assert runtime.settings.workers == (OrdersWorker,)
    finally:
        lowkiq.runtime._current = None


def test_inline_performs_what_the_async_endpoint_enqueues_with_the_async_worker(client: TestClient,
                                                                                caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import lowkiq.testing

    with caplog.at_level(logging.INFO, logger="orders_api.workers"), lowkiq.testing.inline():
        reply = client.post("/orders/7/versions", json={"version": 1, "data": {"total": 3}})
    assert reply.status_code == 202 and reply.json() == {"enqueued": 1}
    assert "order 7 synced: {'total': 3}" in caplog.text
