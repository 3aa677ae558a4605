"""Schedules in the console (page, API, OpenAPI, Prometheus) and from the shell; pause, resume and run-now
against real server processes, every action in the audit log."""

from __future__ import annotations

import json
import time

import pytest
from server_support import APPS, run_cli, start_server
from test_schedules import ticks_performed
from timing_support import wait_until
from webui_support import OrdersWorker, csrf, host_app

import lowkiq
from lowkiq.serializers import dump_json
from lowkiq.store import audit, lua, schedules

S = "/lowkiq/schedules"
NIGHTLY = lowkiq.Schedule("nightly", OrdersWorker, cron="0 3 * * *", timezone="Europe/Moscow", payload={"k": 1})
SYNC = lowkiq.Schedule("sync", OrdersWorker, every=30, id="sync-id")


@pytest.fixture
def runtime(configure):
    return configure(workers=[OrdersWorker], schedules=[NIGHTLY, SYNC])


@pytest.fixture
def client(runtime):
    return host_app().test_client()


def test_the_page_lists_every_schedule_with_its_actions(client, runtime, r):
    lua.run(r, *schedules.tick_call(SYNC, [30.0], 0.0, dump_json))  # one tick enqueued long ago
    page = client.get(S)
    assert page.status_code == 200
    html = page.get_data(True)
    assert 'href="/lowkiq/schedules" class="active">Schedules</a>' in html  # in the top nav
    assert "every day at 03:00 Europe/Moscow" in html and "<code>0 3 * * *</code> (Europe/Moscow)" in html
    assert "every 30 s" in html and "id sync-id" in html
    row = html.split('data-schedule="sync"')[1].split("</tr>")[0]
    assert "1970-01-01" in row and "queued" in row and "never" not in row  # last tick, its job's outcome
    assert 'action="/lowkiq/schedules/sync/pause"' in row and 'action="/lowkiq/schedules/sync/run"' in row
    assert "never" in html.split('data-schedule="nightly"')[1].split("</tr>")[0]

    token = csrf(client, S)
    done = client.post(S + "/sync/pause", data={"csrf_token": token})
    assert (done.status_code, done.headers["Location"]) == (303, S)
    after = client.get(S).get_data(True)
    assert "Paused sync: no tick of it is enqueued until it is resumed." in after
    row = after.split('data-schedule="sync"')[1].split("</tr>")[0]
    assert "pill-warn" in row and 'action="/lowkiq/schedules/sync/resume"' in row
    assert client.post(S + "/sync/resume", data={"csrf_token": token}).status_code == 303
    assert client.post(S + "/sync/run", data={"csrf_token": token}).status_code == 303
    assert client.post(S + "/sync/pause", data={}).status_code in (400, 403)  # no CSRF token: refused
    assert client.post(S + "/nope/pause", data={"csrf_token": token}).status_code == 404
    actions = [(e.action, e.source) for e in audit.read(r, 10)]
    assert actions[:3] == [("schedule/run", "console"), ("schedule/resume", "console"), ("schedule/pause", "console")]


def test_the_api_lists_schedules_and_acts_on_them(client, runtime, r):
    listed = client.get("/lowkiq/api/v1/schedules").get_json()
    by_name = {s["name"]: s for s in listed["schedules"]}
    assert set(by_name) == {"nightly", "sync"}
    nightly = by_name["nightly"]
    assert {k: nightly[k] for k in ("worker", "cron", "every", "timezone", "last_at", "paused")} == {
        "worker": "OrdersWorker", "cron": "0 3 * * *", "every": None, "timezone": "Europe/Moscow",
        "last_at": None, "paused": False}
    now = time.time()
    assert now < nightly["next_at"] <= now + 86400 and time.gmtime(nightly["next_at"]).tm_hour == 0  # 03:00 MSK
    assert by_name["sync"]["next_at"] % 30 == 0

    post = {"headers": {"Content-Type": "application/json"}, "data": "{}"}
    assert client.post("/lowkiq/api/v1/schedules/sync/pause", **post).get_json() == {
        "schedule": "sync", "paused": True, "changed": True}
    assert client.get("/lowkiq/api/v1/schedules").get_json()["schedules"][1]["next_at"] is None
    assert client.post("/lowkiq/api/v1/schedules/sync/pause", **post).get_json()["changed"] is False
    ran = client.post("/lowkiq/api/v1/schedules/sync/run", **post).get_json()
    assert ran["enqueued"] is True and abs(ran["scheduled_at"] - time.time()) < 5
    [(payload, score)] = OrdersWorker.keys() and lowkiq.current().queries(OrdersWorker).job("sync-id").payloads
    assert payload == {"scheduled_at": ran["scheduled_at"]} and score == ran["scheduled_at"]  # also while paused
    assert client.post("/lowkiq/api/v1/schedules/sync/resume", **post).get_json()["changed"] is True
    assert client.post("/lowkiq/api/v1/schedules/nope/run", **post).status_code == 404
    assert [e.action for e in audit.read(r, 4)] == ["schedule/resume", "schedule/run", "schedule/pause",
                                                     "schedule/pause"]
    assert {e.source for e in audit.read(r, 4)} == {"api"}


def test_openapi_documents_the_schedule_routes(client, runtime):
    doc = client.get("/lowkiq/api/v1/openapi.json").get_json()
    assert "get" in doc["paths"]["/api/v1/schedules"]
    for verb in ("pause", "resume", "run"):
        assert "post" in doc["paths"][f"/api/v1/schedules/{{name}}/{verb}"]
    assert set(doc["components"]["schemas"]["Schedule"]["required"]) >= {
        "name", "worker", "cron", "every", "timezone", "next_at", "last_at", "paused"}


def test_prometheus_shows_each_schedule_s_last_tick_and_lag(client, runtime, r):
    lua.run(r, *schedules.tick_call(SYNC, [30.0], 0.0, dump_json))
    text = client.get("/lowkiq/metrics").get_data(True)
    assert 'lowkiq_schedule_last_tick_seconds{schedule="sync",worker="OrdersWorker"} 30.0' in text
    lag = float(text.split('lowkiq_schedule_lag_seconds{schedule="sync",worker="OrdersWorker"} ')[1].split()[0])
    assert lag > time.time() - 100  # its next tick (60) has waited since 1970: no server runs
    assert 'lowkiq_schedule_lag_seconds{schedule="nightly",worker="OrdersWorker"} 0.0' in text


@pytest.mark.slow
def test_pause_stops_ticks_resume_restarts_them_run_now_enqueues_at_once_all_audited(tmp_path, redis_url, r):
    env = {"APP_EVERY": "1", "APP_CATCH_UP": "none", "APP_PERFORM_SECONDS": "0.01"}
    server = start_server(tmp_path, redis_url, app=APPS / "schedule_app.py", env=env)
    cli = ("--redis-url", redis_url)
    try:
        wait_until(lambda: len(ticks_performed(tmp_path)) >= 2, 15)
        listed = json.loads(run_cli(tmp_path, "schedules", *cli, "--json").stdout)
        assert [(s["name"], s["worker"], s["rule"], s["paused"]) for s in listed] == [
            ("ticks", "Ticks", "every 1 s", False)]
        paused = run_cli(tmp_path, "schedules", "pause", "ticks", *cli)
        assert paused.returncode == 0 and paused.stdout == "schedule ticks paused\n"
        paused_at = time.time()
        time.sleep(0.5)  # a run already taken may finish
        seen = len(ticks_performed(tmp_path))
        time.sleep(3.5)  # three ticks and more
        assert len(ticks_performed(tmp_path)) == seen
        # (a tick is enqueued when due by the server's estimate of Redis's clock: half a second of slack)
        assert all(t <= paused_at + 0.5 for t, _, _ in ticks_performed(tmp_path))
        ran = run_cli(tmp_path, "schedules", "run", "ticks", *cli, "--json")
        at = json.loads(ran.stdout)["scheduled_at"]
        wait_until(lambda: any(t == at for t, _, _ in ticks_performed(tmp_path)), 3)  # at once, also paused
        [(_, start, _)] = [x for x in ticks_performed(tmp_path) if x[0] == at]
        assert start - at < 1.5
        # taken before the command: ticks due while it starts and runs may follow the resume, not the pause
        resumed_at = time.time()
        assert run_cli(tmp_path, "schedules", "resume", "ticks", *cli).returncode == 0
        wait_until(lambda: len([t for t, _, _ in ticks_performed(tmp_path) if t > resumed_at]) >= 2, 6)
        assert run_cli(tmp_path, "schedules", "pause", "nope", *cli).returncode == 2
    finally:
        server.stop()
    ticks = [t for t, _, _ in ticks_performed(tmp_path) if t != at]
    assert len(ticks) == len(set(ticks))
    assert not [t for t in ticks if paused_at + 0.5 < t < resumed_at]  # catch_up none: nothing of the pause
    entries = [(e.action, e.source, e.scope) for e in audit.read(r, 10)]
    assert [a for a, _, _ in entries[:3]] == ["schedule/resume", "schedule/run", "schedule/pause"]
    assert all(source == "cli" for _, source, _ in entries[:3])
