"""Redis goes away under a running server and comes back: the server survives and finishes the work."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis
from redis_server import RedisServer
from server_support import import_app, queue_empty, records, start_server
from timing_support import wait_until

import lowkiq

pytestmark = pytest.mark.slow

THREADS = 4
BATCH = 3


def test_server_survives_a_redis_restart_and_finishes(tmp_path):
    app = import_app()
    server_redis = RedisServer(appendonly=True).start()
    try:
        runtime = lowkiq.configure(workers=[app.Recorder], redis_url=server_redis.url)
        ids = [str(i) for i in range(600)]
        app.Recorder.perform_async([{"id": i, "payload": i} for i in ids])
        runtime.close()
        server = start_server(tmp_path, server_redis.url, "--poll-interval", "0.1", "--threads", str(THREADS),
                              env={"APP_WORKERS": "Recorder", "APP_BATCH_SIZE": str(BATCH), "APP_MAX_SLEEP": "0.02"})
        try:
            wait_until(lambda: len(records(tmp_path, "perform")) >= 20)
            server_redis.stop()  # SIGTERM: Redis writes its append-only file and exits
            time.sleep(1.5)
            assert server.process.poll() is None
            performed_during_outage = len(records(tmp_path, "perform"))
            server_redis = RedisServer(appendonly=True, port=server_redis.port, directory=server_redis.directory).start()

            def done() -> set[str]:
                return {i for rec in records(tmp_path, "perform") for i in rec["batch"]}

            wait_until(lambda: done() == set(ids), timeout=30)
            client = redis.Redis.from_url(server_redis.url)
            wait_until(lambda: queue_empty(client, app.Recorder))
            assert server.stop() == 0
        finally:
            server.kill()
        log = server.log()
        assert "Redis error" in log and "Redis is back" in log
        assert performed_during_outage < len(ids)  # the outage really hit mid-work
        counts = Counter(i for rec in records(tmp_path, "perform") for i in rec["batch"])
        rerun = [i for i, n in counts.items() if n > 1]
        # At-least-once: at most the one batch each thread had in flight runs again.
        assert len(rerun) <= THREADS * BATCH, rerun
    finally:
        server_redis.stop()
        lowkiq.runtime._current = None
