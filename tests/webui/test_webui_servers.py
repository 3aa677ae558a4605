"""The Servers page and API, each worker's shard leases, and the dashboard's warning when nobody serves
due work: against real `lowkiq -r` processes."""

from __future__ import annotations

import signal

import pytest
from server_support import APPS, FAST_LEASES, start_server
from timing_support import wait_until
from webui_support import host_app

import lowkiq

pytestmark = pytest.mark.slow



@pytest.fixture
def app_module(configure):
    import importlib
    import sys

    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    module = importlib.import_module("app")
    configure(workers=[module.Recorder, module.Slow])
    return module


@pytest.fixture
def client(app_module):
    return host_app().test_client()


def servers(client) -> list[dict]:
    return client.get("/lowkiq/api/v1/servers").get_json()["servers"]


def test_live_servers_their_shards_and_their_disappearance(app_module, client, redis_url, tmp_path):
    app_module.Recorder.perform_async([{"id": i, "perform_in": 0} for i in range(8)])
    html = client.get("/lowkiq/").get_data(as_text=True)
    assert 'id="no-server"' in html and "No server is running" in html
    env = {"APP_WORKERS": "Recorder", **FAST_LEASES}
    first = start_server(tmp_path, redis_url, "--threads", "2", env=env, name="first")
    second = start_server(tmp_path, redis_url, "--threads", "2", env=env, name="second")
    try:
        def settled():
            found = servers(client)
            held = sorted(i for s in found for i in s["shards"].get("Recorder", []))
            # balanced: the first server serves at its first beat, and hands half back once the second settles
            balanced = all(len(s["shards"].get("Recorder", [])) == 2 for s in found)
            return found if len(found) == 2 and held == list(range(4)) and balanced else None

        found = wait_until(settled, timeout=15)
        assert {s["pid"] for s in found} == {first.pid, second.pid}
        for s in found:
            assert set(s) >= {"id", "host", "pid", "threads", "started_at", "heartbeat_at", "shards", "state"}
            assert s["threads"] == 2 and s["state"] == "serving" and len(s["shards"]["Recorder"]) == 2
        page = client.get("/lowkiq/servers").get_data(as_text=True)
        assert all(f"<td class=\"num\">{p}</td>" in page for p in (first.pid, second.pid))
        busy = client.get("/lowkiq/workers/Recorder/busy").get_data(as_text=True)
        assert busy.count("<td>held</td>") == 4 and 'class="unserved"' not in busy
        dashboard = client.get("/lowkiq/").get_data(as_text=True)
        assert 'id="no-server"' not in dashboard and "2 live servers" in dashboard

        # A stopped server leaves at once; a killed one within its lease.
        assert first.stop() == 0
        wait_until(lambda: [s["pid"] for s in servers(client)] == [second.pid], timeout=3)
        second.signal(signal.SIGKILL)
        second.wait()
        wait_until(lambda: servers(client) == [], timeout=5)
        app_module.Recorder.perform_async([{"id": "late", "perform_in": 0}])
        wait_until(lambda: 'id="no-server"' in client.get("/lowkiq/").get_data(as_text=True), timeout=5)
    finally:
        first.kill()
        second.kill()


def test_the_busy_page_says_which_server_runs_a_job_since_when(app_module, client, redis_url, tmp_path):
    app_module.Slow.perform_async([{"id": "sleepy"}])
    server = start_server(tmp_path, redis_url, "--threads", "1",
                          env={"APP_WORKERS": "Slow", "APP_SLOW_SECONDS": "3", **FAST_LEASES})
    try:
        wait_until(lambda: lowkiq.current().queries(app_module.Slow).busy(), timeout=10)
        page = client.get("/lowkiq/workers/Slow/busy").get_data(as_text=True)
        assert f":{server.pid}" in page and "lowkiq-0" in page
        # The job's own page (where a search for the id lands) says the same.
        job = client.get("/lowkiq/workers/Slow/job?id=sleepy").get_data(as_text=True)
        busy = job.split('id="job-busy"')[1].split("</section>")[0]
        assert f":{server.pid}" in busy and "thread lowkiq-0" in busy and "performing since" in busy
        assert server.stop() == 0
    finally:
        server.kill()


def test_a_worker_with_due_jobs_on_shards_nobody_holds_is_named(app_module, client, redis_url, tmp_path, r):
    """One server runs only Slow: Recorder's due jobs have nobody, and the dashboard says so."""
    app_module.Recorder.perform_async([{"id": i, "perform_in": 0} for i in range(8)])
    server = start_server(tmp_path, redis_url, env={"APP_WORKERS": "Slow", **FAST_LEASES})
    try:
        wait_until(lambda: 'id="unserved"' in client.get("/lowkiq/").get_data(as_text=True), timeout=10)
        html = client.get("/lowkiq/").get_data(as_text=True)
        assert "Recorder</a> (4 of 4 shards" in html
    finally:
        server.kill()
