from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis_server import RedisServer
from timing_support import Clock, wait_until

import lowkiq

# Fixtures other test modules share: the console's (a host app, a runtime, a client) and the
# browser tests' (a console and server of their own, a Chromium page), the fault tests' (an app's worker
# configured against the test Redis).
pytest_plugins = ("webui_support", "browser_support", "server_support")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def configure(r: redis.Redis, redis_url: str, clock: Clock):
    """Configure lowkiq against the test Redis, with a hand-moved clock."""

    def _configure(**options):
        runtime = lowkiq.configure(redis_url=redis_url, **options)
        runtime.clock = clock
        return runtime

    yield _configure
    lowkiq.runtime._current = None


@pytest.fixture(scope="session")
def redis_cluster():
    """One real Redis Cluster (3 primaries, 3 replicas) for the whole session."""
    from redis_cluster import RedisCluster

    cluster = RedisCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster(redis_cluster):
    """The session's cluster, every primary flushed, in a healthy state."""
    redis_cluster.wait_ok()
    redis_cluster.flush()
    return redis_cluster


@pytest.fixture(scope="session")
def redis_sentinel():
    """One real Sentinel setup (a primary, a replica, three sentinels) for the whole session."""
    from redis_sentinel import RedisSentinel

    group = RedisSentinel().start()
    yield group
    group.stop()


@pytest.fixture
def sentinel(redis_sentinel):
    """The session's Sentinel setup, its current primary flushed."""
    wait_until(lambda: redis_sentinel.data(redis_sentinel.primary()).execute_command("ROLE")[0] == b"master", 30)
    redis_sentinel.data(redis_sentinel.primary()).flushall()
    return redis_sentinel
