"""No bad record takes a page down; listings stay bounded; forms address exactly the job shown."""

from __future__ import annotations

import json
import re

import msgpack
import pytest
from webui_support import OrdersWorker, csrf, host_app, ids_in, make_dead

import lowkiq
from lowkiq.store.keys import registry_hash
from lowkiq.webui import create_app
from lowkiq.webui.formatting import form_id

W = "/workers/OrdersWorker"
MALFORMED = {
    "NotJson": "not json",
    "Null": "null",
    "NoQueue": '{"shards_count": 2}',
    "ZeroShards": '{"queue_name": "z", "shards_count": 0}',
    "TextShards": '{"queue_name": "t", "shards_count": "abc"}',
    "HugeShards": '{"queue_name": "h", "shards_count": 200000}',
}


@pytest.fixture
def standalone(redis_url, runtime, r):
    """The standalone console over a registry holding OrdersWorker and every kind of malformed entry."""
    OrdersWorker.perform_async([{"id": 1}])  # registers OrdersWorker
    r.hset(registry_hash(), mapping=MALFORMED)
    return create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()


def test_malformed_registry_entries_show_as_broken_rows_and_every_route_still_answers(standalone):
    """One such entry made every page and API route answer 500, healthy workers included."""
    for path in ("/", "/_live", "/api/v1/stats", "/api/v1/dashboard", "/servers", "/api/v1/servers",
                 W + "/enqueued", W + "/morgue", W + "/busy", W + "/jobs/1", "/api/v1/workers/OrdersWorker/enqueued"):
        assert standalone.get(path).status_code == 200, path
    stats = standalone.get("/api/v1/stats").get_json()
    assert stats["by_worker"]["OrdersWorker"]["length"] == 1
    assert set(stats["broken"]) == set(MALFORMED)
    assert "at most 4096, got 200000" in stats["broken"]["HugeShards"]
    dashboard = standalone.get("/api/v1/dashboard").get_json()
    assert [q["name"] for q in dashboard["queues"]] == ["OrdersWorker"]
    assert {b["name"] for b in dashboard["broken"]} == set(MALFORMED)
    html = standalone.get("/").get_data(as_text=True)
    for name in MALFORMED:
        assert f'<tr class="broken-row" data-worker="{name}">' in html
    assert "the entry has no queue_name" in html and "not JSON" in html
    page = standalone.get("/workers/HugeShards/enqueued")
    assert page.status_code == 404 and "broken registry entry" in page.get_data(as_text=True)
    api = standalone.get("/api/v1/workers/ZeroShards/morgue")
    assert api.status_code == 404 and "shards_count must be a positive int" in api.get_json()["error"]


def test_stats_without_broken_entries_keep_spec_shape(client, runtime):
    assert set(client.get("/lowkiq/api/v1/stats").get_json()) == {"total", "by_worker"}


def test_a_corrupt_job_record_shows_as_broken_in_its_row(configure, r):
    def strict_error(raw: bytes) -> str:
        return raw.decode("ascii")  # a custom loader that fails on other bytes

    rt = configure(workers=[OrdersWorker], load_error=strict_error)
    client = host_app().test_client()
    make_dead(rt, OrdersWorker, [{"id": "dead-bad"}, {"id": "dead-ok"}], error="é".encode())
    OrdersWorker.perform_async([{"id": "bad", "payload": 1}, {"id": "good", "payload": {"fine": True}}])
    shard = OrdersWorker.keys().shard(rt.queue(OrdersWorker).shard_of("bad"))
    r.hset(shard.payloads_hash, "bad", b"\xc1 not msgpack")
    dead = OrdersWorker.keys().shard(rt.queue(OrdersWorker).shard_of("dead-bad"))
    r.hset(dead.morgue_payloads_hash, "dead-bad", msgpack.packb(["only a payload, no score"]))
    busy = OrdersWorker.keys().shard(rt.queue(OrdersWorker).shard_of("in-flight"))
    r.hset(busy.processing_hash, "in-flight", b"\x93garbage")
    for path in ("enqueued", "morgue", "busy", "jobs/bad", "jobs/dead-bad", "jobs/in-flight"):
        page = client.get(f"/lowkiq/workers/OrdersWorker/{path}")
        assert page.status_code == 200, path
    enqueued = client.get("/lowkiq/workers/OrdersWorker/enqueued").get_data(as_text=True)
    assert "undecodable payload (not a payload list" in enqueued and "fine" in enqueued
    morgue = client.get("/lowkiq/workers/OrdersWorker/morgue").get_data(as_text=True)
    assert "undecodable payload (not a payload list" in morgue and "undecodable error (UnicodeDecodeError" in morgue
    assert "not a processing record" in client.get("/lowkiq/workers/OrdersWorker/busy").get_data(as_text=True)
    api = client.get("/lowkiq/api/v1/workers/OrdersWorker/enqueued?order_by=id").get_json()
    assert [job["id"] for job in api["jobs"]] == ["bad", "good"]
    assert "undecodable payload" in api["jobs"][0]["payloads"][0][0]


def test_long_payloads_are_cut_in_listings_with_a_link_to_the_whole_job(client, runtime):
    """30 payloads of 1 MB made a 30 MB page."""
    big = {"blob": "x" * 200_000}
    OrdersWorker.perform_async([{"id": i, "payload": big} for i in range(10)])
    page = client.get("/lowkiq/workers/OrdersWorker/enqueued")
    assert page.status_code == 200 and len(page.data) < 100_000, len(page.data)
    html = page.get_data(as_text=True)
    assert "more characters not shown" in html
    assert re.search(r'<a href="/lowkiq/workers/OrdersWorker/job\?id=0">See the whole job</a>', html)
    whole = client.get("/lowkiq/workers/OrdersWorker/job?id=0")
    assert "x" * 200_000 in whole.get_data(as_text=True)


@pytest.mark.parametrize("twin", ["twin\x00", "twin\r\n", "twin\r", "twin\x7f", "~b64:dHdpbg=="])
def test_form_ids_cannot_alias_another_job(client, runtime, r, twin):
    """Ticking 'twin\\x00' deleted 'twin\\ufffd': a form does not post every character back as it was."""
    OrdersWorker.perform_async([{"id": "twin\ufffd"}, {"id": "twin"}])
    for job_id in ("twin\n", twin):  # written by some other producer: perform_async refuses control characters
        plant(r, job_id)
    token = csrf(client, "/lowkiq/workers/OrdersWorker/enqueued")
    html = client.get("/lowkiq/workers/OrdersWorker/enqueued?order_by=id").get_data(as_text=True)
    values = ids_in(html.encode())
    posted = form_id(twin)
    assert len(values) == 4 and posted in values and posted.startswith("~b64:")
    done = client.post("/lowkiq/workers/OrdersWorker/enqueued/delete", data={"csrf_token": token, "ids": [posted]})
    assert done.status_code == 303
    left = {job.id for job in lowkiq.current().queries(OrdersWorker).enqueued("id", limit=10).rows}
    assert left == {"twin\ufffd", "twin\n", "twin"} - {twin}


def plant(r, job_id: str) -> None:
    """A queued job written straight into Redis, as the push script lays it out."""
    shard = OrdersWorker.keys().shard(lowkiq.current().queue(OrdersWorker).shard_of(job_id))
    r.zadd(shard.ids_by_perform_in_zset, {job_id: 1})
    r.zadd(shard.ids_lex_zset, {job_id: 0})
    r.hset(shard.payloads_hash, job_id, msgpack.packb([b'""', 1.0]))


def test_a_malformed_form_id_is_a_400(client, runtime):
    token = csrf(client, "/lowkiq/workers/OrdersWorker/enqueued")
    reply = client.post("/lowkiq/workers/OrdersWorker/enqueued/delete", data={"csrf_token": token, "ids": ["~b64:%%%"]})
    assert reply.status_code == 400 and "malformed job id" in reply.get_data(as_text=True)


def test_the_header_names_the_watched_redis_without_its_password(redis_url, runtime, r):
    host_and_port = redis_url.removeprefix("redis://").removesuffix("/0")
    with_password = f"redis://:hunter2@{host_and_port}/0"
    r.config_set("requirepass", "hunter2")
    try:
        html = create_app(environ={"LOWKIQ_REDIS_URL": with_password}).test_client().get("/").get_data(as_text=True)
    finally:
        r.execute_command("AUTH", "hunter2")
        r.config_set("requirepass", "")
    assert f"redis://{host_and_port}/0" in html and "hunter2" not in html
    mounted = host_app().test_client().get("/lowkiq/").get_data(as_text=True)
    assert f'<span class="redis-label" title="The Redis this console watches">redis://{host_and_port}/0</span>' in mounted


def test_dashboard_json_lists_no_broken_entries_when_there_are_none(client, runtime):
    assert json.loads(client.get("/lowkiq/api/v1/dashboard").data)["broken"] == []


def test_a_script_error_answers_503_naming_it_without_the_scripts_hash(client, runtime, r):
    OrdersWorker.perform_async([{"id": 1}])
    shard = OrdersWorker.keys().shard(0)
    r.delete(shard.ids_by_perform_in_zset)
    r.set(shard.ids_by_perform_in_zset, "not a zset")  # what a stray client could do
    api = client.get("/lowkiq/api/v1/workers/OrdersWorker/enqueued")
    assert api.status_code == 503
    error = api.get_json()["error"]
    assert error.startswith("Redis refused the request: WRONGTYPE") and "user_script" not in error, error
