"""Fairness with real server processes and their execution log (docs/fairness.md): a late tenant is served
behind a big backlog, per-id order and merging hold with groups, priorities, debounce; also on a Cluster."""

from __future__ import annotations

import importlib
import sys
import time

import pytest
from server_support import APPS, records, start_server
from timing_support import wait_until

pytestmark = [pytest.mark.slow]

APP = APPS / "fairness_app.py"


def app_module():
    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    return importlib.import_module("fairness_app")


def completions(tmp, worker: str = "Tenants") -> list[tuple[str, list]]:
    return [(job_id, payloads) for rec in records(tmp, "perform") if rec["worker"] == worker
            for job_id, payloads in rec["batch"].items()]


def late_tenant_is_served_early(tmp_path, url: str, env: dict[str, str]) -> None:
    module = app_module()
    tenants = module.Tenants
    # A's backlog first (two versions each for a few ids: merged, in order), then B's few ids
    tenants.perform_async([{"id": f"a{i}", "group": "A", "payload": {"g": "A", "v": 1}} for i in range(2000)])
    tenants.perform_async([{"id": f"a{i}", "group": "A", "payload": {"g": "A", "v": 2}} for i in range(5)])
    tenants.perform_async([{"id": f"b{i}", "group": "B", "payload": {"g": "B", "v": 1}} for i in range(10)])
    server = start_server(tmp_path, url, "-t", "1", "--poll-interval", "0.2", app=APP, env=env)
    try:
        wait_until(lambda: len(completions(tmp_path)) >= 2010, timeout=25)
    finally:
        server.stop()
    done = completions(tmp_path)
    order = [job_id for job_id, _ in done]
    assert sorted(order) == sorted([f"a{i}" for i in range(2000)] + [f"b{i}" for i in range(10)]), "lost or ran twice"
    positions = [n for n, job_id in enumerate(order) if job_id.startswith("b")]
    assert max(positions) < 60, positions
    by_id = dict(done)
    # merging and per-id order unchanged: the second version joined the first, in order
    assert [p["v"] for p in by_id["a3"]] == [1, 2]


def test_a_late_group_is_done_within_the_first_60_completions(configure, tmp_path, redis_url):
    configure(workers=[app_module().Tenants])
    late_tenant_is_served_early(tmp_path, redis_url, {"APP_SHARDS": "4"})


def test_on_a_cluster_too(cluster, tmp_path):
    from cluster_support import covering_queue

    import lowkiq

    name = covering_queue(cluster, "tenants", 4)
    env = {"APP_SHARDS": "4", "APP_QUEUE": name}
    module = app_module()
    module.Tenants.queue_name = name
    try:
        lowkiq.configure(redis_url=cluster.url, workers=[module.Tenants])
        late_tenant_is_served_early(tmp_path, cluster.url, env)
    finally:
        module.Tenants.queue_name = "Tenants"


def test_a_higher_priority_worker_goes_first(configure, tmp_path, redis_url):
    module = app_module()
    configure(workers=[module.Urgent, module.Routine])
    module.Routine.perform_async([{"id": f"r{i}"} for i in range(200)])
    module.Urgent.perform_async([{"id": f"u{i}"} for i in range(50)])
    server = start_server(tmp_path, redis_url, "-t", "1", "--poll-interval", "0.2", app=APP,
                          env={"APP_WORKERS": "Urgent,Routine"})
    try:
        wait_until(lambda: len(records(tmp_path, "perform")) >= 250, timeout=25)
    finally:
        server.stop()
    order = [rec["worker"] for rec in records(tmp_path, "perform")]
    # every urgent job before any routine job but the first few a thread may take before it knows better
    assert order[:50].count("Urgent") >= 48, order[:60]


def test_a_burst_runs_once_after_it_ends(configure, tmp_path, redis_url):
    module = app_module()
    configure(workers=[module.Burst])
    server = start_server(tmp_path, redis_url, "-t", "1", "--poll-interval", "0.1", app=APP,
                          env={"APP_WORKERS": "Burst"})
    try:
        started = time.time()
        for v in range(6):  # a burst of 1.5 s, a job every 0.3 s: each pushes the start 1 s on
            module.Burst.perform_async([{"id": "x", "payload": v}])
            time.sleep(0.3)
        wait_until(lambda: records(tmp_path, "perform"), timeout=10)
        time.sleep(0.5)
    finally:
        server.stop()
    performs = records(tmp_path, "perform")
    assert [list(p["batch"]["x"]) for p in performs] == [[0, 1, 2, 3, 4, 5]]  # once, every version
    # not before the burst ended plus debounce (1 s), nor past debounce_max (3 s) after its first job
    assert 1.5 + 0.9 <= performs[0]["start"] - started <= 3.0 + 0.5
