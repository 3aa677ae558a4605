"""The console's `metrics` route: Prometheus's text format, from what Redis holds, behind the console's auth."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

import pytest
import redis
from flask import Flask, Response, request
from prometheus_client.parser import text_string_to_metric_families
from prometheus_support import SECURITY_HEADERS, Samples, readme_metric_names, samples, scrape, served_names
from queue_support import held_lease
from redis_server import RedisServer
from webui_support import WORKERS, MailerWorker, OrdersWorker, fail, host_app, make_dead

import lowkiq
from lowkiq.runtime import Runtime
from lowkiq.store import codec, lua, membership, pausing, registry
from lowkiq.store.keys import registry_hash
from lowkiq.webui import create_app
from lowkiq.webui.settings import SettingError

ORDERS = (("queue", "OrdersWorker"), ("worker", "OrdersWorker"))
MAILER = (("queue", "mailer"), ("worker", "MailerWorker"))
PER_WORKER = ("lowkiq_queue_length", "lowkiq_queue_fresh", "lowkiq_queue_retries", "lowkiq_morgue_length",
              "lowkiq_busy", "lowkiq_lag_seconds", "lowkiq_processed_total", "lowkiq_failed_total",
              "lowkiq_dropped_payloads_total", "lowkiq_shards",
              "lowkiq_shards_owned", "lowkiq_paused", "lowkiq_held_ids")

def of(found: Samples, labels: tuple[tuple[str, str], ...]) -> dict[str, float]:
    """Every per-worker series of one worker, by name."""
    return {name: value for (name, got), value in found.items() if got == labels}


def beat(r: redis.Redis, member: str, shards: dict[str, list[int]], ttl_ms: int = 60_000) -> None:
    """A server process's heartbeat, as `lowkiq -r` beats it, holding ``shards`` (queue -> indexes)."""
    record = membership.info(threads=2, version=lowkiq.__version__, state="running", started_ms=1,
                             queues=[("OrdersWorker", 4), ("mailer", 2)], hint=None, stable_name="",
                             shards=shards, ttl_ms=ttl_ms)
    lua.run(r, *membership.beat_call(member, ttl_ms, record))


def ids_in_other_shards(taken: set[int], count: int, shards_count: int = OrdersWorker.shards_count) -> list[str]:
    """``count`` ids, each in a shard of its own, none in ``taken``."""
    out = []
    for i in range(1000):
        shard = codec.shard_of(f"id{i}", shards_count)
        if shard not in taken:
            taken.add(shard)
            out.append(f"id{i}")
            if len(out) == count:
                return out
    raise AssertionError("not enough shards")


@pytest.fixture
def seeded(runtime: Runtime, r: redis.Redis, clock: Any) -> dict[str, str]:
    """Orders: 2 dead, 3 processed, 1 busy, 1 retrying, 2 fresh (one 30 s overdue);
    Mailer: 1 dead, 1 fresh 5 s overdue. Two live servers hold orders' shards 0-2 and mailer's 0."""
    now = clock()
    make_dead(runtime, OrdersWorker, [{"id": "d1"}, {"id": "d2"}])
    make_dead(runtime, MailerWorker, [{"id": "md"}])

    q = runtime.queue(OrdersWorker)
    OrdersWorker.perform_async([{"id": f"p{i}"} for i in range(3)])
    for shard in range(OrdersWorker.shards_count):
        lease = held_lease(q, shard)
        taken = q.ack_and_take(None, (lease, 1000))
        if taken and taken.jobs:
            q.ack_and_take((lease, [job.id for job in taken.jobs]), None)

    # The busy job and the retried one in shards of their own: taking one shard never touches the other.
    busy, retried = ids_in_other_shards(set(), 2)
    OrdersWorker.perform_async([{"id": busy}])
    [job] = q.ack_and_take(None, (held_lease(q, q.shard_of(busy)), 1000)).jobs
    assert job.id == busy
    OrdersWorker.perform_async([{"id": retried}])
    fail(runtime, OrdersWorker, [retried])  # back in the queue, due in 60 s

    OrdersWorker.perform_async([{"id": "f1", "perform_in": now - 30}, {"id": "f2", "perform_in": now + 100}])
    MailerWorker.perform_async([{"id": "m1", "perform_in": now - 5}])

    beat(r, "gone", {"OrdersWorker": [3]}, ttl_ms=1)
    time.sleep(0.01)
    beat(r, "a", {"OrdersWorker": [0, 1], "mailer": [0]})
    beat(r, "b", {"OrdersWorker": [1, 2]})
    return {"busy": busy, "retried": retried}


def test_every_worker_s_numbers_as_redis_holds_them(seeded: dict[str, str], client: Any) -> None:
    found = scrape(client)
    assert of(found, ORDERS) == {
        "lowkiq_queue_length": 3,  # the retried job, f1, f2
        "lowkiq_queue_fresh": 2,
        "lowkiq_queue_retries": 1,
        "lowkiq_morgue_length": 2,
        "lowkiq_busy": 1,
        "lowkiq_lag_seconds": 30.0,
        "lowkiq_processed_total": 3,
        "lowkiq_failed_total": 3,  # two on their way to the morgue, one retried
        "lowkiq_dropped_payloads_total": 0,  # no cap: nothing dropped
        "lowkiq_shards": 4,
        "lowkiq_shards_owned": 3,  # 0, 1 and 2; 3 was held by a server that is gone
        "lowkiq_paused": 0,
        "lowkiq_held_ids": 0,  # its morgue_policy is oldest_payload: dead ids hold nothing back
    }
    assert of(found, MAILER) == {
        "lowkiq_queue_length": 1,
        "lowkiq_queue_fresh": 1,
        "lowkiq_queue_retries": 0,
        "lowkiq_morgue_length": 1,
        "lowkiq_busy": 0,
        "lowkiq_lag_seconds": 5.0,
        "lowkiq_processed_total": 0,
        "lowkiq_failed_total": 1,
        "lowkiq_dropped_payloads_total": 0,
        "lowkiq_shards": 2,
        "lowkiq_shards_owned": 1,
        "lowkiq_paused": 0,
        "lowkiq_held_ids": 0,
    }
    assert found[("lowkiq_servers_live", ())] == 2
    assert found[("lowkiq_workers_broken", ())] == 0
    assert 0 < found[("lowkiq_scrape_duration_seconds", ())] < 5
    assert not any(name == "lowkiq_shard_lag_seconds" for name, _ in found)  # off by default


def test_the_numbers_follow_redis_from_one_scrape_to_the_next(seeded: dict[str, str], runtime: Runtime,
                                                             client: Any, clock: Any) -> None:
    before = of(scrape(client), ORDERS)
    clock.advance(10)
    OrdersWorker.perform_async([{"id": "late"}])
    runtime.actions(OrdersWorker).kill_failed()
    after = of(scrape(client), ORDERS)
    assert (before["lowkiq_lag_seconds"], after["lowkiq_lag_seconds"]) == (30.0, 40.0)
    assert (before["lowkiq_queue_length"], after["lowkiq_queue_length"]) == (3, 3)  # one more, one killed
    assert (before["lowkiq_queue_retries"], after["lowkiq_queue_retries"]) == (1, 0)
    assert (before["lowkiq_morgue_length"], after["lowkiq_morgue_length"]) == (2, 3)


def test_a_paused_queue_reads_1_until_resumed(seeded: dict[str, str], r: Any, client: Any) -> None:
    pausing.pause(r, "mailer", worker="MailerWorker", who="ops", source="cli")
    found = scrape(client)
    assert (of(found, MAILER)["lowkiq_paused"], of(found, ORDERS)["lowkiq_paused"]) == (1, 0)
    pausing.resume(r, "mailer", worker="MailerWorker", who="ops", source="cli")
    assert of(scrape(client), MAILER)["lowkiq_paused"] == 0


def test_names_follow_prometheus_conventions(seeded: dict[str, str], app: Flask) -> None:
    app.config["LOWKIQ_WEB_METRICS_PER_SHARD"] = True
    text = app.test_client().get("/lowkiq/metrics").get_data(as_text=True)
    families = list(text_string_to_metric_families(text))
    assert {f.name for f in families} >= {"lowkiq_queue_length", "lowkiq_processed", "lowkiq_failed",
                                          "lowkiq_servers_live", "lowkiq_workers_broken", "lowkiq_shard_lag_seconds"}
    for family in families:
        assert re.fullmatch(r"lowkiq_[a-z_]+", family.name), family.name
        assert family.documentation, family.name
        assert family.type in ("gauge", "counter"), family.name
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name == family.name + "_total"
            else:
                assert sample.name == family.name and not sample.name.endswith("_total")
            assert set(sample.labels) <= {"worker", "queue", "shard"}
        if "lag" in family.name or "duration" in family.name:
            assert family.name.endswith("_seconds")
    per_worker = {name for name, labels in samples(text) if dict(labels).keys() == {"worker", "queue"}}
    assert per_worker == set(PER_WORKER)


def test_per_shard_lag_only_when_asked(seeded: dict[str, str], runtime: Runtime) -> None:
    assert not any(name == "lowkiq_shard_lag_seconds" for name, _ in scrape(host_app().test_client()))
    assert not any(name == "lowkiq_shard_lag_seconds"
                   for name, _ in scrape(host_app(LOWKIQ_WEB_METRICS_PER_SHARD="off").test_client()))

    found = scrape(host_app(LOWKIQ_WEB_METRICS_PER_SHARD="on").test_client())
    lags = {labels: value for (name, labels), value in found.items() if name == "lowkiq_shard_lag_seconds"}
    f1, m1 = codec.shard_of("f1", 4), codec.shard_of("m1", 2)
    assert lags == {
        **{tuple(sorted((*ORDERS, ("shard", str(s))))): 30.0 if s == f1 else 0.0 for s in range(4)},
        **{tuple(sorted((*MAILER, ("shard", str(s))))): 5.0 if s == m1 else 0.0 for s in range(2)},
    }
    assert of(found, ORDERS)["lowkiq_lag_seconds"] == 30.0  # the per-worker series stay


def test_the_per_shard_setting_is_parsed_strictly(runtime: Runtime, redis_url: str) -> None:
    for bad in ("y", "1 ", "", "2"):
        with pytest.raises(SettingError, match="LOWKIQ_WEB_METRICS_PER_SHARD"):
            host_app(LOWKIQ_WEB_METRICS_PER_SHARD=bad)
        with pytest.raises(SettingError, match="LOWKIQ_WEB_METRICS_PER_SHARD"):
            create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_METRICS_PER_SHARD": bad})
    # Set wrong after mounting: the scrape answers 500 naming it, in plain text.
    mounted = host_app()
    mounted.config["LOWKIQ_WEB_METRICS_PER_SHARD"] = "y"
    reply = mounted.test_client().get("/lowkiq/metrics")
    assert reply.status_code == 500 and reply.mimetype == "text/plain"
    assert "LOWKIQ_WEB_METRICS_PER_SHARD" in reply.get_data(as_text=True)


def test_a_host_app_s_protection_covers_it_and_read_only_mode_does_not_hide_it(runtime: Runtime) -> None:
    mounted = host_app(LOWKIQ_WEB_READONLY=True)

    @mounted.before_request
    def signed_in() -> Response | None:
        return None if request.headers.get("X-Ops") == "yes" else Response("sign in\n", status=401)

    http = mounted.test_client()
    assert http.get("/lowkiq/metrics").status_code == 401
    assert scrape(http, headers={"X-Ops": "yes"})[("lowkiq_servers_live", ())] == 0
    assert http.post("/lowkiq/metrics", headers={"X-Ops": "yes"}).status_code == 405


def test_a_mounted_console_with_a_password_asks_for_it(runtime: Runtime) -> None:
    http = host_app(LOWKIQ_WEB_PASSWORD="s3cret").test_client()
    refused = http.get("/lowkiq/metrics")
    assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
    assert scrape(http, headers=_basic("admin", "s3cret"))[("lowkiq_workers_broken", ())] == 0


def test_the_standalone_console_with_a_password(seeded: dict[str, str], r: redis.Redis, redis_url: str) -> None:
    registry.register(r, WORKERS)
    r.hset(registry_hash(), "Ghost", b"not json")
    http = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "s3cret"}).test_client()

    for headers in ({}, _basic("admin", "wrong"), _basic("root", "s3cret")):
        refused = http.get("/metrics", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Basic ")
        assert b"lowkiq_" not in refused.data
        assert all(refused.headers.get(h) for h in SECURITY_HEADERS)

    found = scrape(http, "/metrics", headers=_basic("admin", "s3cret"))
    assert found[("lowkiq_workers_broken", ())] == 1
    assert not any(dict(labels).get("worker") == "Ghost" for _, labels in found)
    orders = of(found, ORDERS)  # the registry's workers; lag is measured on the real clock here
    assert (orders["lowkiq_queue_length"], orders["lowkiq_morgue_length"], orders["lowkiq_busy"]) == (3, 2, 1)
    assert (orders["lowkiq_processed_total"], orders["lowkiq_failed_total"]) == (3, 3)
    assert of(found, MAILER)["lowkiq_queue_length"] == 1
    assert found[("lowkiq_servers_live", ())] == 2


def test_a_redis_that_does_not_answer_is_a_503_not_half_the_numbers(tmp_path: Any) -> None:
    server = RedisServer(directory=str(tmp_path)).start()
    try:
        registry.register(redis.Redis.from_url(server.url), WORKERS)
        http = create_app(environ={"LOWKIQ_REDIS_URL": server.url, "LOWKIQ_WEB_REDIS_TIMEOUT": "1"}).test_client()
        assert of(scrape(http, "/metrics"), ORDERS)["lowkiq_queue_length"] == 0
    finally:
        server.stop()

    down = http.get("/metrics")
    assert down.status_code == 503
    assert down.mimetype == "text/plain"
    body = down.get_data(as_text=True)
    assert body.startswith("Redis did not answer") and body.count("\n") == 1
    assert "lowkiq_" not in body and "<" not in body
    assert all(down.headers.get(h) for h in SECURITY_HEADERS) and down.headers["Cache-Control"] == "no-store"


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_every_name_the_docs_and_their_alert_rules_use_is_served(seeded: dict[str, str], app: Flask) -> None:
    app.config["LOWKIQ_WEB_METRICS_PER_SHARD"] = True
    served = served_names(app.test_client().get("/lowkiq/metrics").get_data(as_text=True))
    named = readme_metric_names("Prometheus: the console's `metrics` route")
    assert {"lowkiq_lag_seconds", "lowkiq_paused", "lowkiq_shards_owned"} <= named  # the alert rules' names
    assert named <= served, f"the docs name metrics the console does not serve: {sorted(named - served)}"
