"""A server's probes on its metrics port: /healthz (alive, Redis answering) and /readyz (holds its share of
shards, not stopping), with a real ``lowkiq -r`` and a real redis-server that the test stops and resumes."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request

import pytest
from redis_server import RedisServer, free_port
from server_support import FAST_LEASES, start_server
from timing_support import wait_until

pytestmark = pytest.mark.slow


def probe(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}


def test_healthz_and_readyz_follow_redis_and_the_shards_held(tmp_path):
    redis = RedisServer().start()
    port = free_port()
    server = start_server(tmp_path, redis.url, "--metrics-port", str(port), env=FAST_LEASES)
    try:
        wait_until(lambda: probe(port, "/readyz")[0] == 200, 20)
        status, body = probe(port, "/readyz")
        assert body["status"] == "ok" and body["checks"]["shards"]["held"] == body["checks"]["shards"]["share"] > 0
        status, body = probe(port, "/healthz")
        assert status == 200 and body["checks"]["redis"]["ok"] is True
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert b"lowkiq_" in reply.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=5)
        assert missing.value.code == 404

        # Redis stops answering (SIGSTOP): both probes say so once a lease's time has passed.
        os.kill(redis.process.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: probe(port, "/healthz")[0] == 503, 10)
            status, body = probe(port, "/healthz")
            assert body["status"] == "unavailable" and "Redis has not answered" in body["checks"]["redis"]["reason"]
            assert probe(port, "/readyz")[0] == 503
        finally:
            os.kill(redis.process.pid, signal.SIGCONT)
        wait_until(lambda: probe(port, "/healthz")[0] == 200, 15)
        wait_until(lambda: probe(port, "/readyz")[0] == 200, 15)

        # Stopping: not ready any more while it finishes and hands its shards over.
        server.signal(signal.SIGTERM)
        wait_until(lambda: probe(port, "/readyz")[0] in (0, 503), 10)
        assert server.wait(20) == 0
    finally:
        server.kill()
        redis.stop()


def test_a_second_server_is_ready_only_once_it_holds_its_share(tmp_path):
    redis = RedisServer().start()
    ports = [free_port(), free_port()]
    servers = [start_server(tmp_path, redis.url, "--metrics-port", str(port), env=FAST_LEASES, name=f"s{i}")
               for i, port in enumerate(ports)]
    try:
        for port in ports:
            wait_until(lambda port=port: probe(port, "/readyz")[0] == 200, 30)
        shares = [probe(port, "/readyz")[1]["checks"]["shards"] for port in ports]
        # two live servers split the shards: each holds its own share, none holds them all
        assert all(s["held"] == s["share"] for s in shares)
        assert sum(s["share"] for s in shares) == sum(s["held"] for s in shares) > max(s["share"] for s in shares)
    finally:
        for server in servers:
            server.stop()
        redis.stop()
