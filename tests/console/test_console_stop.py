"""Stopping a perform from the console: the busy page's Stop button (process isolation only, not read-only),
``POST api/v1/workers/<w>/busy/stop`` and what it writes beside the shard's lease. Real redis-server, the
console's real routes (Flask test client); the server's side is in test_keep_flowing_children."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_support import DOC, Spec
from queue_support import held_lease
from webui_support import csrf, host_app

import lowkiq
from lowkiq.runtime import Runtime
from lowkiq.store import audit, stops


class RenderWorker(lowkiq.Worker):
    shards_count = 2
    isolation = "process"

    def perform(self, payloads_by_id: Any) -> None:
        pass


class ThreadWorker(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id: Any) -> None:
        pass


API = "/lowkiq/api/v1/workers"


@pytest.fixture
def runtime(configure: Any) -> Runtime:
    rt: Runtime = configure(workers=[RenderWorker, ThreadWorker])
    return rt


def busy(rt: Runtime, worker: type[lowkiq.Worker], job_id: str) -> Any:
    """``job_id`` in processing under this test's lease of its shard, as a server's take leaves it."""
    worker.perform_async([{"id": job_id, "payload": {"v": 1}}])
    q = rt.queue(worker)
    lease = held_lease(q, q.shard_of(job_id))
    assert [job.id for job in q.ack_and_take(None, (lease, 10)).jobs] == [job_id]
    return lease


def stop(client: Any, worker: str, body: Any) -> Any:
    return client.post(f"{API}/{worker}/busy/stop", json=body)


def test_the_api_asks_the_server_to_stop_a_process_perform_and_audits_it(runtime):
    lease = busy(runtime, RenderWorker, "r1")
    client = host_app().test_client()
    answer = stop(client, "RenderWorker", {"id": "r1"})
    assert answer.status_code == 202, answer.get_data(as_text=True)
    assert answer.get_json()["stop"] == "requested"
    # What the server performing the batch reads, bound to this batch.
    who = stops.requested(runtime.client, lease, {"r1"})
    assert who is not None and who.endswith("(api)")
    assert stops.requested(runtime.client, lease, {"other"}) is None
    [entry] = audit.read(runtime.client)
    assert (entry.action, entry.source, entry.worker, entry.ids, entry.count) == (
        "busy/stop", "api", "RenderWorker", ["r1"], 1)
    # A later batch of the shard (another take) is not stopped by it.
    runtime.client.hincrby(lease.keys.lease_hash, "taken_ms", 1)
    assert stops.requested(runtime.client, lease, {"r1"}) is None


def test_refusals_touch_nothing_and_record_nothing(runtime):
    busy(runtime, ThreadWorker, "t1")
    client = host_app().test_client()
    thread = stop(client, "ThreadWorker", {"id": "t1"})
    assert thread.status_code == 409
    assert "thread performs cannot be stopped safely" in thread.get_json()["error"]
    missing = stop(client, "RenderWorker", {"id": "nope"})
    assert missing.status_code == 404 and "no busy job 'nope'" in missing.get_json()["error"]
    lease = busy(runtime, RenderWorker, "r2")
    assert stop(client, "RenderWorker", {"ids": ["r2"]}).status_code == 400
    assert stop(client, "RenderWorker", {}).status_code == 400
    assert stop(client, "NoSuchWorker", {"id": "r2"}).status_code == 404
    readonly = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    assert stop(readonly, "RenderWorker", {"id": "r2"}).status_code == 403
    runtime.client.hset(lease.keys.lease_hash, "expires_ms", 1)  # its server died: nobody performs it
    orphan = stop(client, "RenderWorker", {"id": "r2"})
    assert orphan.status_code == 409 and "no live server" in orphan.get_json()["error"]
    assert audit.read(runtime.client) == []
    assert runtime.client.hget(lease.keys.lease_hash, "stop_id") is None


def test_the_busy_page_has_a_stop_button_only_for_process_performs(runtime):
    busy(runtime, RenderWorker, "r1")
    busy(runtime, ThreadWorker, "t1")
    client = host_app().test_client()
    page = client.get("/lowkiq/workers/RenderWorker/busy").get_data(as_text=True)
    assert page.count("data-stop") == 1 and "data-cannot-stop" not in page
    thread_page = client.get("/lowkiq/workers/ThreadWorker/busy").get_data(as_text=True)
    assert "data-stop" not in thread_page and "data-cannot-stop" in thread_page
    assert "cannot be stopped safely" in thread_page
    readonly = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    assert "data-stop" not in readonly.get("/lowkiq/workers/RenderWorker/busy").get_data(as_text=True)

    # The button's form: CSRF-checked, then the same request as the API's, audited as from the console.
    path = "/lowkiq/workers/RenderWorker/busy"
    assert client.post(f"{path}/stop", data={"id": "r1"}).status_code == 403  # no token
    done = client.post(f"{path}/stop", data={"csrf_token": csrf(client, path), "id": "r1", "next": path})
    assert done.status_code == 303 and done.headers["Location"].endswith(path)
    [entry] = audit.read(runtime.client)
    assert (entry.action, entry.source, entry.ids) == ("busy/stop", "console", ["r1"])
    flash = client.get(path).get_data(as_text=True)
    assert "Stopping job r1" in flash
    again = client.post(f"{path}/stop", data={"csrf_token": csrf(client, path), "id": "t9", "next": path})
    assert again.status_code == 303
    assert "Job t9 is not busy any more" in client.get(path).get_data(as_text=True)


def test_the_route_answers_as_documented(runtime):
    busy(runtime, RenderWorker, "r1")
    busy(runtime, ThreadWorker, "t1")
    client = host_app().test_client()
    spec = Spec(client.get("/lowkiq" + DOC).get_json())
    path = "/api/v1/workers/{worker}/busy/stop"
    spec.check_body({"id": "r1"}, path)
    spec.check_body({"id": 7}, path)
    for worker, body, status in (("RenderWorker", {"id": "r1"}, 202), ("ThreadWorker", {"id": "t1"}, 409),
                                 ("RenderWorker", {"id": "nope"}, 404), ("RenderWorker", {"id": ""}, 400)):
        reply = stop(client, worker, body)
        assert reply.status_code == status, (worker, body)
        spec.check(reply, path, "post")
