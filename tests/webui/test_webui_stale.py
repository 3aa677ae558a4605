"""Workers nobody serves or registers any more are marked stale and can be forgotten, unless they hold jobs."""

from __future__ import annotations

import json
import time

import pytest
from webui_support import OrdersWorker, csrf, host_app

import lowkiq
from lowkiq.store import audit, lua, membership, registry
from lowkiq.store.keys import registry_hash
from lowkiq.webui import create_app


def entry(name: str, registered_at: float) -> str:
    return json.dumps({"name": name, "queue_name": name, "shards_count": 2, "max_retry_count": 25, "batch_size": 1,
                       "registered_at": registered_at})


def beat(r, member: str, queues: list[tuple[str, int]]) -> None:
    """A server process's heartbeat, as `lowkiq -r` beats it, serving ``queues``: it is live for a minute."""
    record = membership.info(threads=2, version=lowkiq.__version__, state="running", started_ms=1, queues=queues,
                             hint=None, stable_name="", shards={}, ttl_ms=60_000)
    lua.run(r, *membership.beat_call(member, 60_000, record))


def forget(client, worker: str) -> str:
    """Forget ``worker`` from the dashboard's button; the flash the dashboard shows next."""
    token = csrf(client, f"/workers/{worker}/enqueued")  # the dashboard has no form for a worker that is not stale
    done = client.post(f"/workers/{worker}/forget", data={"csrf_token": token})
    assert done.status_code == 303
    return client.get("/").get_data(as_text=True)


def test_an_old_unserved_worker_is_stale_and_forgotten_with_a_button(redis_url, r):
    r.hset(registry_hash(), mapping={"Gone": entry("Gone", time.time() - 2 * 86400),
                                     "Fresh": entry("Fresh", time.time() - 60)})
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url})
    client = app.test_client()
    page = client.get("/")
    rows = {name: page.data.split(f'data-worker="{name}"'.encode())[1].split(b"</tr>")[0] for name in ("Gone", "Fresh")}
    assert b">stale<" in rows["Gone"] and b"/workers/Gone/forget" in rows["Gone"]
    assert b">stale<" not in rows["Fresh"]
    token = csrf(client, "/")
    done = client.post("/workers/Gone/forget", data={"csrf_token": token})
    assert done.status_code == 303
    assert b"Forgot worker Gone." in client.get("/").data
    assert [w.name for w in registry.known(r)] == ["Fresh"]
    [recorded] = audit.read(r)
    assert (recorded.action, recorded.worker, recorded.source) == ("forget", "Gone", "console")


def test_a_stale_worker_that_holds_jobs_is_not_forgotten(redis_url, r, configure):
    configure(workers=[OrdersWorker])
    OrdersWorker.perform_async([{"id": "1"}, {"id": "2"}])
    r.hset(registry_hash(), "OrdersWorker", json.dumps({**json.loads(r.hget(registry_hash(), "OrdersWorker")),
                                                         "registered_at": time.time() - 10 * 86400}))
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_STALE_AFTER": "3600"})
    client = app.test_client()
    token = csrf(client, "/")
    client.post("/workers/OrdersWorker/forget", data={"csrf_token": token})
    assert b"was not forgotten: its queue still holds 2 jobs" in client.get("/").data
    assert [w.name for w in registry.known(r)] == ["OrdersWorker"]


def test_read_only_shows_no_forget_button_and_refuses_the_post(redis_url, r):
    r.hset(registry_hash(), "Gone", entry("Gone", 0))
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_READONLY": "1"})
    client = app.test_client()
    page = client.get("/")
    assert b">stale<" in page.data and b"/forget" not in page.data
    assert client.post("/workers/Gone/forget").status_code == 403
    assert [w.name for w in registry.known(r)] == ["Gone"]


def test_a_worker_a_live_server_serves_is_not_forgotten(redis_url, r):
    """Old registration, but a live server serves its queue: not stale, so the registry keeps it."""
    r.hset(registry_hash(), "Served", entry("Served", time.time() - 10 * 86400))
    beat(r, "server-1", [("Served", 2)])
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    page = client.get("/").data
    assert b">stale<" not in page.split(b'data-worker="Served"')[1].split(b"</tr>")[0]
    shown = forget(client, "Served")
    assert "Served was not forgotten: it is not stale: a live server serves its queue (" in shown
    assert [w.name for w in registry.known(r)] == ["Served"]
    assert audit.read(r) == []


@pytest.mark.slow
def test_a_recently_registered_worker_is_not_forgotten(redis_url, r):
    """No live server, but registered an hour ago, within LOWKIQ_WEB_STALE_AFTER (a day): not stale."""
    r.hset(registry_hash(), "Fresh", entry("Fresh", time.time() - 3600))
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    shown = forget(client, "Fresh")
    assert ("Fresh was not forgotten: it is not stale: it was registered 1 h 0 min ago, "
            "and LOWKIQ_WEB_STALE_AFTER is 1 d 0 h.") in shown
    assert [w.name for w in registry.known(r)] == ["Fresh"]
    assert audit.read(r) == []
    # The same worker past a shorter LOWKIQ_WEB_STALE_AFTER is stale, and goes.
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_STALE_AFTER": "600"}).test_client()
    assert "Forgot worker Fresh." in forget(client, "Fresh")
    assert registry.known(r) == []


def test_a_worker_registered_again_after_the_page_was_read_is_not_forgotten(redis_url, r):
    """The registry is cached for a few seconds; forget reads the entry afresh, so a new start counts."""
    r.hset(registry_hash(), "Back", entry("Back", time.time() - 10 * 86400))
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    assert b">stale<" in client.get("/").data  # the console has now read (and cached) the old entry
    r.hset(registry_hash(), "Back", entry("Back", time.time()))  # a server of it started since
    assert "Back was not forgotten: it is not stale: it was registered just now, " in forget(client, "Back")
    assert [w.name for w in registry.known(r)] == ["Back"]


def test_a_worker_registered_by_a_host_whose_clock_runs_ahead_is_registered_in_the_future(redis_url, r):
    """A registration stamped ahead of the console's clock reads as such, never as "ago"."""
    r.hset(registry_hash(), "Ahead", entry("Ahead", time.time() + 600))
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    shown = forget(client, "Ahead")
    assert "Ahead was not forgotten: it is not stale: it was registered in 9 min, " in shown or \
        "Ahead was not forgotten: it is not stale: it was registered in 10 min, " in shown, shown
    assert [w.name for w in registry.known(r)] == ["Ahead"]


@pytest.mark.slow
def test_a_console_of_an_app_forgets_none_of_its_workers(runtime, r):
    """An app-configured console's workers are defined by its code: never stale, never forgotten."""
    r.hset(registry_hash(), "OrdersWorker", entry("OrdersWorker", time.time() - 10 * 86400))
    app = host_app()
    client = app.test_client()
    token = csrf(client, "/lowkiq/workers/OrdersWorker/enqueued")
    client.post("/lowkiq/workers/OrdersWorker/forget", data={"csrf_token": token})
    assert "OrdersWorker was not forgotten: this console" in client.get("/lowkiq/").get_data(as_text=True)
    assert "OrdersWorker" in {w.name for w in registry.known(r)}
    assert audit.read(r) == []
