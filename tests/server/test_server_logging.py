"""A server's logging with a real ``lowkiq -r``: an app's own ``logging.basicConfig`` is honoured, and a failed
perform is logged at ERROR with its exception, so error trackers' logging integrations capture the stack."""

from __future__ import annotations

import json

import pytest
from server_support import APPS, FAST_LEASES, start_server
from timing_support import wait_until

import lowkiq

pytestmark = pytest.mark.slow


class Boom(lowkiq.Worker):
    """The logging app's worker of that name: the test enqueues into it."""

    shards_count = 1

    def perform(self, payloads_by_id):
        pass


def test_the_apps_logging_set_up_is_honoured_and_a_failed_perform_carries_its_traceback(tmp_path, redis_url, r):
    tracked = tmp_path / "tracker.jsonl"
    server = start_server(tmp_path, redis_url, app=APPS / "logging_app.py",
                          env={**FAST_LEASES, "APP_TRACKER_FILE": str(tracked)})
    try:
        lowkiq.configure(redis_url=redis_url, workers=[Boom])
        Boom.perform_async([{"id": "order-7", "payload": "v1"}])

        def failures() -> list[dict]:
            if not tracked.exists():
                return []
            lines = [json.loads(line) for line in tracked.read_text().splitlines()]
            return [entry for entry in lines if "failed" in entry["message"]]

        wait_until(failures, 20)
        (entry,) = failures()
        assert entry["logger"] == "lowkiq.server" and "order-7" in entry["message"]
        # the stack of the user's code, as a tracker would show it
        assert "Traceback (most recent call last)" in entry["exception"]
        assert "deep_in_the_app" in entry["exception"] and "KeyError" in entry["exception"]
    finally:
        server.stop()
        lowkiq.runtime._current = None
    log = server.log()
    # lowkiq's own records went through the app's format: its basicConfig was not a no-op
    assert "APPFORMAT INFO lowkiq.server:" in log
    assert "APPFORMAT ERROR lowkiq.server: Boom shard 0: ids [order-7] failed: KeyError" in log
