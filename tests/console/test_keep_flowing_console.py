"""What the console shows of time limits and the whole_id morgue policy: performs past their worker's
time_limit (busy page, job page, busy API, Prometheus) and the ids a whole_id morgue holds (dashboard,
worker page, stats and dashboard APIs, Prometheus). Real redis-server, Flask test client; the standalone
console reads both from the registry, without the app's code."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openapi_support import DOC, PREFIX, Spec
from queue_support import RoundTrips, held_lease
from webui_support import OrdersWorker, host_app, make_dead

import lowkiq
from lowkiq.console import Console
from lowkiq.console.busy import busy_jobs, over_time_limit
from lowkiq.runtime import Runtime
from lowkiq.store import registry
from lowkiq.store.keys import registry_hash
from lowkiq.store.registry import WorkerInfo


class LimitedWorker(lowkiq.Worker):
    shards_count = 2
    time_limit = 2

    def perform(self, payloads_by_id: Any) -> None:
        pass


class LedgerWorker(lowkiq.Worker):
    shards_count = 2
    morgue_policy = "whole_id"
    max_retry_count = 5

    def perform(self, payloads_by_id: Any) -> None:
        pass


WORKERS = [LimitedWorker, LedgerWorker, OrdersWorker]
API = PREFIX + "/api/v1"


@pytest.fixture
def runtime(configure) -> Runtime:
    return configure(workers=WORKERS)


@pytest.fixture
def client(runtime: Runtime) -> Any:
    return host_app().test_client()


def take_since(rt: Runtime, worker: type[lowkiq.Worker], job_id: str, seconds_ago: float) -> None:
    """``job_id`` in processing, its batch taken ``seconds_ago`` (Redis time) as its shard's lease says."""
    q = rt.queue(worker)
    shard = q.shard_of(job_id)
    lease = held_lease(q, shard)
    taken = q.ack_and_take(None, (lease, 100))
    assert [job.id for job in taken.jobs] == [job_id]
    seconds, micros = rt.client.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    rt.client.hset(lease.keys.lease_hash, "taken_ms", now_ms - int(seconds_ago * 1000))


@pytest.fixture
def busy(runtime: Runtime) -> dict[str, str]:
    """LimitedWorker (time_limit 2 s): one job taken 5 s ago (over), one taken now (under); OrdersWorker
    (no limit): one taken 500 s ago (never over)."""
    q = runtime.queue(LimitedWorker)
    over, under = next(str(i) for i in range(100) if q.shard_of(str(i)) == 0), next(
        str(i) for i in range(100) if q.shard_of(str(i)) == 1)
    LimitedWorker.perform_async([{"id": over}, {"id": under}])
    take_since(runtime, LimitedWorker, over, 5)
    take_since(runtime, LimitedWorker, under, 0)
    OrdersWorker.perform_async([{"id": "slow"}])
    take_since(runtime, OrdersWorker, "slow", 500)
    return {"over": over, "under": under}


# ---- over the time limit -------------------------------------------------------------------------


def test_the_busy_api_says_how_long_each_job_runs_and_whether_past_the_time_limit(client, busy):
    data = client.get(API + "/workers/LimitedWorker/busy").get_json()
    assert data["time_limit"] == 2
    jobs = {job["id"]: job for job in data["jobs"]}
    assert jobs[busy["over"]]["over_time_limit"] is True and 4.5 < jobs[busy["over"]]["running_for"] < 15
    assert jobs[busy["under"]]["over_time_limit"] is False and 0 <= jobs[busy["under"]]["running_for"] < 2
    orders = client.get(API + "/workers/OrdersWorker/busy").get_json()
    assert orders["time_limit"] is None
    [slow] = orders["jobs"]
    assert slow["running_for"] > 400 and slow["over_time_limit"] is False  # no limit: never over it


def test_busy_answers_satisfy_the_openapi_document(client, busy):
    spec = Spec(client.get(PREFIX + DOC).get_json())
    for worker in ("LimitedWorker", "OrdersWorker", "LedgerWorker"):
        spec.check(client.get(f"{API}/workers/{worker}/busy"), "/api/v1/workers/{worker}/busy")
    spec.check(client.get(API + "/stats"), "/api/v1/stats")
    spec.check(client.get(API + "/dashboard"), "/api/v1/dashboard")


def test_the_busy_page_flags_the_jobs_past_the_time_limit(client, busy):
    page = client.get(PREFIX + "/workers/LimitedWorker/busy").get_data(as_text=True)
    rows = re.findall(r"<tr[^>]*>.*?</tr>", page, re.S)
    over_row = next(row for row in rows if f">{busy['over']}</a>" in row)
    under_row = next(row for row in rows if f">{busy['under']}</a>" in row)
    assert "data-over-time-limit" in over_row and "over time limit" in over_row
    assert "data-over-time-limit" not in under_row and "over time limit" not in under_row
    assert "1 job has run past the worker&#39;s time limit" in page or "1 job has run past the worker's time limit" in page
    assert "TimeLimitExceeded" in page  # thread isolation: says why it still runs
    assert "time limit" in client.get(PREFIX + "/workers/LimitedWorker/enqueued").get_data(as_text=True)

    orders = client.get(PREFIX + "/workers/OrdersWorker/busy").get_data(as_text=True)
    assert "over time limit" not in orders and "data-over-time-limit" not in orders


def test_the_job_page_flags_its_busy_record(client, busy):
    over = client.get(PREFIX + "/workers/LimitedWorker/job", query_string={"id": busy["over"]}).get_data(as_text=True)
    under = client.get(PREFIX + "/workers/LimitedWorker/job", query_string={"id": busy["under"]}).get_data(as_text=True)
    assert "data-over-time-limit" in over and "performing for" in over
    assert "data-over-time-limit" not in under


def metric(text: str, name: str) -> dict[str, float]:
    """worker -> value of ``name``."""
    out = {}
    for line in text.splitlines():
        found = re.match(rf'{name}\{{queue="[^"]*",worker="([^"]+)"\}} (\S+)', line) or re.match(
            rf'{name}\{{worker="([^"]+)",queue="[^"]*"\}} (\S+)', line)
        if found:
            out[found.group(1)] = float(found.group(2))
    return out


def test_prometheus_counts_the_performs_past_their_time_limit(client, busy):
    text = client.get(PREFIX + "/metrics").get_data(as_text=True)
    # Only workers with a time_limit have the series; OrdersWorker's 500 s perform is over nothing.
    assert metric(text, "lowkiq_performs_over_time_limit") == {"LimitedWorker": 1}


def test_over_time_limit_asks_nothing_more_when_no_worker_with_a_limit_is_busy(runtime, monkeypatch):
    c = Console(runtime.client, lambda: ([registry.info_of(w) for w in WORKERS], []))
    OrdersWorker.perform_async([{"id": "slow"}])
    take_since(runtime, OrdersWorker, "slow", 500)
    rows = c.metrics()
    trips = RoundTrips(monkeypatch)
    assert over_time_limit(c, rows) == {"LimitedWorker": 0}
    assert trips.count == 0


def test_a_standalone_console_reads_the_time_limit_and_the_policy_from_the_registry(runtime, busy, redis_url):
    registry.register(runtime.client, WORKERS)
    c = Console.from_url(redis_url, redis_timeout=5)  # no app code: the registry only
    view = c.worker("LimitedWorker")
    assert (view.info.time_limit, view.info.isolation, view.info.morgue_policy) == (2, "thread", "oldest_payload")
    assert c.worker("LedgerWorker").info.holds_dead_ids and not c.worker("OrdersWorker").info.holds_dead_ids
    _, jobs = busy_jobs(c, view, c.queries(view).busy())
    assert {b.job.id: b.over_time_limit for b in jobs} == {busy["over"]: True, busy["under"]: False}
    assert over_time_limit(c, c.metrics()) == {"LimitedWorker": 1}


# ---- the registry --------------------------------------------------------------------------------


def test_register_records_time_limit_isolation_and_morgue_policy(r):
    class Boxed(lowkiq.Worker):
        shards_count = 1
        time_limit = 1.5
        isolation = "process"
        morgue_policy = "whole_id"

    registry.register(r, [Boxed, OrdersWorker])
    workers = {w.name: w for w in registry.read(r)[0]}
    assert (workers["Boxed"].time_limit, workers["Boxed"].isolation, workers["Boxed"].morgue_policy) == (
        1.5, "process", "whole_id")
    assert workers["OrdersWorker"] == WorkerInfo("OrdersWorker", "OrdersWorker", 4, 5, 1)  # the defaults


@pytest.mark.parametrize(("fields", "problem"), [
    ({"time_limit": 0}, "time_limit must be a positive number"),
    ({"time_limit": "1"}, "time_limit must be a positive number"),
    ({"time_limit": True}, "time_limit must be a positive number"),
    ({"isolation": "fork"}, "isolation must be one of thread, process"),
    ({"morgue_policy": "<b>all</b>"}, "morgue_policy must be one of oldest_payload, whole_id"),
])
def test_a_bad_recorded_field_makes_the_entry_broken(r, fields, problem):
    r.hset(registry_hash(), "Bad", json.dumps({"queue_name": "bad", "shards_count": 1, **fields}))
    workers, broken = registry.read(r)
    assert workers == [] and broken[0].name == "Bad" and problem in broken[0].problem


def test_an_entry_written_before_these_fields_reads_as_the_defaults(r):
    r.hset(registry_hash(), "Old", json.dumps({"queue_name": "old", "shards_count": 2}))
    [old] = registry.read(r)[0]
    assert (old.time_limit, old.isolation, old.morgue_policy, old.holds_dead_ids) == (None, "thread", "oldest_payload",
                                                                                      False)


# ---- held ids ------------------------------------------------------------------------------------


@pytest.fixture
def held(runtime: Runtime) -> None:
    make_dead(runtime, LedgerWorker, [{"id": "acct-1"}, {"id": "acct-2"}, {"id": "acct-3"}])
    make_dead(runtime, OrdersWorker, [{"id": "o1"}])


def test_the_stats_api_counts_held_ids_of_whole_id_workers(client, held):
    data = client.get(API + "/stats").get_json()
    assert data["by_worker"]["LedgerWorker"] == {"length": 0, "morgue_length": 3, "lag": 0.0, "held": 3}
    # A worker of the default policy holds nothing back: its entry keeps SPEC's shape.
    assert data["by_worker"]["OrdersWorker"] == {"length": 0, "morgue_length": 1, "lag": 0.0}
    assert data["total"] == {"length": 0, "morgue_length": 4, "lag": 0.0, "held": 3}


def test_stats_keep_spec_s_exact_shape_without_whole_id_workers(configure, held):
    configure(workers=[OrdersWorker])
    data = host_app().test_client().get(API + "/stats").get_json()
    assert data == {"total": {"length": 0, "morgue_length": 1, "lag": 0.0},
                    "by_worker": {"OrdersWorker": {"length": 0, "morgue_length": 1, "lag": 0.0}}}


def test_counting_held_ids_costs_no_read_more(client, held, monkeypatch):
    client.get(API + "/stats")  # scripts loaded, pool warm
    trips = RoundTrips(monkeypatch)
    client.get(API + "/stats")
    assert trips.count == 1


def test_the_dashboard_and_the_worker_page_show_held_ids(client, held):
    page = client.get(PREFIX + "/").get_data(as_text=True)
    ledger = re.search(r'<tr data-worker="LedgerWorker">.*?</tr>', page, re.S).group(0)
    orders = re.search(r'<tr data-worker="OrdersWorker">.*?</tr>', page, re.S).group(0)
    assert 'data-held="3"' in ledger and "3 held" in ledger
    assert "data-held" not in orders
    assert re.search(r'data-total="held">3<', page)
    queues = {q["name"]: q for q in client.get(API + "/dashboard").get_json()["queues"]}
    assert (queues["LedgerWorker"]["held"], queues["OrdersWorker"]["held"]) == (3, 0)

    counts = client.get(PREFIX + "/workers/LedgerWorker/_counts").get_data(as_text=True)
    assert re.search(r'data-count="held"[^>]*>3 held<', counts)
    assert 'data-count="held"' not in client.get(PREFIX + "/workers/OrdersWorker/_counts").get_data(as_text=True)
    assert "whole_id" in client.get(PREFIX + "/workers/LedgerWorker/morgue").get_data(as_text=True)


def test_prometheus_shows_held_ids(client, held):
    text = client.get(PREFIX + "/metrics").get_data(as_text=True)
    assert metric(text, "lowkiq_held_ids") == {"LimitedWorker": 0, "LedgerWorker": 3, "OrdersWorker": 0}
