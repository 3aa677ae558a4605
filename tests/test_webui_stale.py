"""Workers nobody serves or registers any more are marked stale and can be forgotten, unless they hold jobs."""

from __future__ import annotations

import json
import time

from webui_support import OrdersWorker, csrf  # noqa: F401

from lowkiq import audit, registry
from lowkiq.queue.keys import registry_hash
from lowkiq.webui import create_app


def entry(name: str, registered_at: float) -> str:
    return json.dumps({"name": name, "queue_name": name, "shards_count": 2, "max_retry_count": 25, "batch_size": 1,
                       "registered_at": registered_at})


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
