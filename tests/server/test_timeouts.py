"""A frozen Redis (SIGSTOP) fails calls within their configured timeouts, not after a minute.

Each test freezes a redis-server of its own, never the session's, and thaws it in a finally.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from redis_server import RedisServer
from webui_support import OrdersWorker

import lowkiq
from lowkiq.webui import create_app


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@contextmanager
def frozen(server: RedisServer) -> Iterator[None]:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def timed(call: Any) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        call()
    except Exception as exc:
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


@pytest.mark.slow
def test_perform_async_raises_within_pool_timeout(own_redis):
    try:
        lowkiq.configure(workers=[OrdersWorker], redis_url=own_redis.url, pool_timeout=1.0)
        OrdersWorker.perform_async([{"id": "warm"}])  # connected and registered
        with frozen(own_redis):
            took, error = timed(lambda: OrdersWorker.perform_async([{"id": 1}]))
        assert isinstance(error, redis.RedisError), error
        assert took < 2.5, took
    finally:
        lowkiq.runtime._current = None


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/", "/api/v1/stats", "/workers/OrdersWorker/enqueued", "/api/v1/workers/OrdersWorker/morgue"])
def test_standalone_console_answers_503_within_its_redis_timeout(own_redis, path):
    redis.Redis.from_url(own_redis.url).hset("lowkiq:v1:registry", "OrdersWorker",
                                             '{"queue_name": "OrdersWorker", "shards_count": 4}')
    app = create_app(environ={"LOWKIQ_REDIS_URL": own_redis.url, "LOWKIQ_WEB_REDIS_TIMEOUT": "1"})
    client = app.test_client()
    assert client.get(path).status_code == 200
    with frozen(own_redis):
        started = time.monotonic()
        reply = client.get(path)
        took = time.monotonic() - started
    assert reply.status_code == 503, reply.data
    assert took < 3.5, took
    assert b"Redis did not answer" in reply.data
    if "/api/" in path:
        assert "Redis did not answer" in reply.get_json()["error"]


@pytest.mark.slow
def test_mounted_console_uses_its_own_short_timeout(own_redis):
    from webui_support import host_app

    try:
        lowkiq.configure(workers=[OrdersWorker], redis_url=own_redis.url, pool_timeout=30.0)
        client = host_app(LOWKIQ_WEB_REDIS_TIMEOUT=1).test_client()
        assert client.get("/lowkiq/api/v1/stats").status_code == 200
        with frozen(own_redis):
            took, _ = timed(lambda: client.get("/lowkiq/api/v1/stats"))
            reply = client.get("/lowkiq/api/v1/stats")
        assert reply.status_code == 503 and took < 3.5, (reply.status_code, took)
    finally:
        lowkiq.runtime._current = None
