"""Dependencies (``after``) with real ``lowkiq -r`` processes: the execution log shows every dependent performed
after its dependency's perform ended and within seconds of it, a dependency in the morgue holding its dependent
until an operator deletes it, a release surviving kill -9 of the server that acknowledged the dependency, and the
same across the slots of a Redis Cluster."""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from server_support import APPS, FAST_LEASES, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store.codec import shard_of

APP = APPS / "depends_app.py"
pytestmark = pytest.mark.slow


@pytest.fixture
def app(redis_url: str, r: redis.Redis) -> Iterator[Any]:
    yield configured(redis_url)
    lowkiq.runtime._current = None


def configured(url: str) -> Any:
    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    module = importlib.import_module("depends_app")
    lowkiq.configure(redis_url=url, workers=[module.Customers, module.Orders])
    return module


def performs(tmp: Path, worker: str) -> dict[str, list[dict[str, Any]]]:
    """id -> its successful performs' records, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in records(tmp, "perform"):
        if rec["worker"] == worker and rec["ok"]:
            for job_id in rec["batch"]:
                out.setdefault(job_id, []).append(rec)
    return out


def after(*ids: str) -> list[dict[str, str]]:
    return [{"worker": "Customers", "id": job_id} for job_id in ids]


def check_order(tmp: Path, dependencies: dict[str, list[str]], *, within: float = 5.0) -> None:
    """Each order performed once, after every perform of its customers ended, and within ``within`` s of the last."""
    customers, orders = performs(tmp, "Customers"), performs(tmp, "Orders")
    for order, needs in dependencies.items():
        [done] = orders[order]
        ended = max(rec["end"] for c in needs for rec in customers[c])
        assert done["start"] >= ended, f"{order} started {ended - done['start']:.3f} s before {needs} ended"
        assert done["start"] - ended < within, f"{order} followed {needs} only after {done['start'] - ended:.1f} s"


def test_dependents_follow_their_dependencies_performs(tmp_path, redis_url, app):
    server = start_server(tmp_path, redis_url, app=APP, env=FAST_LEASES)
    try:
        app.Customers.perform_async([{"id": f"c{i}", "payload": "create"} for i in range(6)])
        deps = {f"o{i}": [f"c{i}"] for i in range(6)}
        deps["o-both"] = ["c1", "c4"]
        app.Orders.perform_async([{"id": o, "payload": "v1", "after": after(*needs)} for o, needs in deps.items()]
                                 + [{"id": "o-free", "payload": "v1"}])
        # versions enqueued while the first ones run (or wait) wait for them too
        app.Customers.perform_async([{"id": "c5", "payload": "update"}])
        app.Orders.perform_async([{"id": "o5b", "after": after("c5")}])
        deps["o5b"] = ["c5"]
        wait_until(lambda: len(performs(tmp_path, "Orders")) == len(deps) + 1, 30)
        check_order(tmp_path, deps)
    finally:
        server.stop()
    assert "Traceback" not in server.log()


def test_a_dependency_in_the_morgue_holds_its_dependent_until_deleted(tmp_path, redis_url, app):
    from lowkiq import console

    server = start_server(tmp_path, redis_url, app=APP, env=FAST_LEASES)
    try:
        app.Customers.perform_async([{"id": "c1", "payload": "boom"}])
        app.Orders.perform_async([{"id": "o1", "payload": "v1", "after": after("c1")}])
        wait_until(lambda: lowkiq.current().queries(app.Customers).morgue_count() == 1, 20)
        time.sleep(2)  # several beats: nothing releases it
        assert "o1" not in performs(tmp_path, "Orders")
        c = console.Console.from_runtime(lowkiq.current(), redis_timeout=5)
        orders = c.worker("Orders")
        [waiting] = c.waiting(orders, "o1")
        assert waiting.on == [console.WaitingOn("Customers", "c1", "dead")]
        assert waiting.payload == "v1"
        assert c.waiting_count(orders) == 1
        deleted_at = time.time()
        assert lowkiq.current().actions(app.Customers).morgue_delete(["c1"]) == 1
        wait_until(lambda: "o1" in performs(tmp_path, "Orders"), 10)
        assert performs(tmp_path, "Orders")["o1"][0]["start"] - deleted_at < 5
        assert c.waiting_count(orders) == 0
        assert c.waiting(orders, "o1") == []
    finally:
        server.stop()


def test_kill_9_between_the_ack_and_the_delivery_loses_no_release(tmp_path, redis_url, r, app):
    # Beats 3 s apart: the release waits in the dependency's stream long enough to kill the server there.
    slow_beats = {"LOWKIQ_LEASE_TTL": "9", "LOWKIQ_HEARTBEAT_INTERVAL": "3", "LOWKIQ_SETTLE": "0.3"}
    first = start_server(tmp_path, redis_url, app=APP, env=slow_beats, name="first")
    second = None
    try:
        app.Customers.perform_async([{"id": "c1", "payload": "create"}])
        app.Orders.perform_async([{"id": "o1", "payload": "v1", "after": after("c1")}])
        stream = app.Customers.keys().shard(shard_of("c1", app.Customers.shards_count)).depend_releases_stream
        wait_until(lambda: r.xlen(stream) == 1, 20, interval=0.005)
        first.kill()  # kill -9: the release is written (with the ack), not delivered
        assert r.xlen(stream) == 1
        assert "o1" not in performs(tmp_path, "Orders")
        second = start_server(tmp_path, redis_url, app=APP, env=FAST_LEASES, name="second")
        wait_until(lambda: "o1" in performs(tmp_path, "Orders"), 30)
        check_order(tmp_path, {"o1": ["c1"]}, within=30)
        assert len(performs(tmp_path, "Orders")["o1"]) == 1
        assert r.xlen(stream) == 0
    finally:
        first.kill()
        if second is not None:
            second.stop()


def test_dependencies_across_cluster_slots(tmp_path, cluster):
    from lowkiq.transport import keyset_slot

    app = configured(cluster.url)
    try:
        customers, orders = app.Customers.keys(), app.Orders.keys()
        # pairs whose dependency and dependent live on different primaries
        pairs = []
        for i in range(40):
            c, o = f"c{i}", f"o{i}"
            slots = keyset_slot(customers.shard(shard_of(c, 4))), keyset_slot(orders.shard(shard_of(o, 3)))
            if cluster.owner(slots[0]) != cluster.owner(slots[1]):
                pairs.append((c, o))
        assert len(pairs) >= 4
        pairs = pairs[:6]
        server = start_server(tmp_path, cluster.url, app=APP, env=FAST_LEASES)
        try:
            app.Customers.perform_async([{"id": c, "payload": "create"} for c, _ in pairs])
            app.Orders.perform_async([{"id": o, "after": after(c)} for c, o in pairs])
            wait_until(lambda: len(performs(tmp_path, "Orders")) == len(pairs), 40)
            check_order(tmp_path, {o: [c] for c, o in pairs})
        finally:
            server.stop()
    finally:
        lowkiq.runtime._current = None
