"""The console's reads and actions answer the same on a Redis Cluster as on one Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from cluster_support import covering_worker
from prometheus_support import scrape
from queue_support import held_lease
from webui_support import fail, host_app, make_dead

import lowkiq
from lowkiq.runtime import Runtime
from lowkiq.store.metrics import FULL, STATS, MetricsReader
from lowkiq.store.queries import Cursor

API = "/lowkiq/api/v1"

# A Redis Cluster or Sentinels of its own: minutes of setup the fast run leaves out.
pytestmark = pytest.mark.slow


@pytest.fixture
def workers(cluster):
    orders = covering_worker(cluster, "parity", 6, max_retry_count=2)
    mailer = covering_worker(cluster, "mailer", 3)
    return orders, mailer


def seeded(url: str, workers, clock) -> Runtime:
    """A runtime on ``url`` with the same queues in the same state: fresh, retried, dead, busy, processed."""
    orders, mailer = workers
    runtime = lowkiq.configure(redis_url=url, workers=list(workers))
    runtime.clock = clock
    make_dead(runtime, mailer, [{"id": f"d{i}", "payload": {"n": i}} for i in range(7)])
    orders.perform_async([{"id": f"o{i}", "payload": {"n": i}, "perform_in": clock() - i} for i in range(40)])
    orders.perform_async([{"id": f"o{i}", "payload": {"n": -i}, "score": 0} for i in range(0, 40, 5)])
    fail(runtime, orders, ["o3", "o17"])
    q = runtime.queue(orders)
    untouched = sorted({q.shard_of(f"o{i}") for i in range(40)} - {q.shard_of("o3"), q.shard_of("o17")})
    assert q.ack_and_take(None, (held_lease(q, untouched[0]), 2)).jobs  # busy
    lease = held_lease(q, untouched[1])
    done = q.ack_and_take(None, (lease, 3))
    q.ack_and_take((lease, [j.id for j in done.jobs]), None)  # processed
    mailer.perform_async([{"id": "m", "perform_in": clock() + 50}])
    return runtime


@pytest.fixture
def both(redis_server, cluster, workers, clock):
    redis.Redis.from_url(redis_server.url).flushall()
    standalone = seeded(redis_server.url, workers, clock)
    clustered = seeded(cluster.url, workers, clock)
    assert clustered.client.mode == "cluster" and standalone.client.mode == "standalone"
    yield standalone, clustered
    for rt in (standalone, clustered):
        rt.close()
    lowkiq.runtime._current = None


def pages(rt: Runtime, worker, listing: str, order_by: str, desc: bool) -> list[list[Any]]:
    """Every page of a listing, walked forward by cursor and back again."""
    q = rt.queries(worker)
    read = getattr(q, listing)
    out, after = [], None
    while True:
        page = read(order_by, desc=desc, limit=7, after=after)
        out.append(page.rows)
        if not page.has_more:
            break
        after = page.last
    back = read(order_by, desc=desc, limit=7, before=Cursor(page.first.score, page.first.id)) if page.first else None
    out.append(back.rows if back else [])
    return out


@pytest.mark.slow
def test_metrics_listings_and_lookups_are_the_same(both, workers, clock):
    standalone, clustered = both
    queues = [w.keys() for w in workers]
    for kind in (FULL, STATS):
        mine = MetricsReader(clustered.client).read(queues, clock(), kind=kind)[0]
        assert mine == MetricsReader(standalone.client).read(queues, clock(), kind=kind)[0]
    orders, mailer = workers
    [o, m] = MetricsReader(clustered.client).read(queues, clock())[0]
    assert (o.busy, o.processed, m.morgue_length) == (2, 3, 7) and o.retries > 0
    for order_by in ("id", "perform_in", "retry_count"):
        for desc in (False, True):
            expected = pages(standalone, orders, "enqueued", order_by, desc)
            assert pages(clustered, orders, "enqueued", order_by, desc) == expected
    for order_by in ("id", "updated_at"):
        assert pages(clustered, mailer, "morgue", order_by, True) == pages(standalone, mailer, "morgue", order_by, True)
    for rt in (standalone, clustered):
        q = rt.queries(orders)
        ids = [f"o{i}" for i in range(0, 40, 3)] + ["missing"]
        looked = (q.jobs(ids), rt.queries(mailer).morgue_jobs(["d3", "d1", "x"]), q.busy(), q.busy_job(q.busy()[0].id))
        if rt is standalone:
            expected = looked
    assert looked == expected


@pytest.mark.slow
def test_the_stats_api_and_dashboard_are_the_same_and_name_every_node(both, workers):
    standalone, clustered = both
    answers = []
    for rt in (standalone, clustered):
        lowkiq.runtime._current = rt
        app = host_app()
        browser = app.test_client()
        answers.append((browser.get(API + "/stats").get_json(), browser.get(API + "/dashboard").get_json()))
    (stats, dash), (cluster_stats, cluster_dash) = answers
    assert cluster_stats == stats
    assert (cluster_dash["queues"], cluster_dash["totals"]) == (dash["queues"], dash["totals"])
    info = MetricsReader(clustered.client).read([], 0.0, with_info=True)[1]
    assert len(info["nodes"]) == 6
    assert sorted(n["role"] for n in info["nodes"]) == ["master"] * 3 + ["slave"] * 3
    assert info["used_memory"] == sum(n["used_memory"] for n in info["nodes"])
    assert info["connected_clients"] == sum(n["connected_clients"] for n in info["nodes"])


@pytest.mark.parametrize("action, args", [
    ("morgue_requeue", (["d1", "d4", "nope"],)),
    ("morgue_delete", (["d2", "d6"],)),
    ("morgue_requeue_all", ()),
    ("morgue_delete_all", ()),
])
def test_morgue_actions_count_and_leave_the_same_state(both, workers, clock, action, args):
    _, mailer = workers
    _same_after(both, workers, clock, mailer, action, args)


@pytest.mark.parametrize("action, args", [
    ("delete", (["o1", "o2", "o11", "nope"],)),
    ("delete_all", ()),
    ("perform_all_now", ()),
    ("kill_failed", ()),
    ("delete_failed", ()),
])
def test_queue_actions_count_and_leave_the_same_state(both, workers, clock, action, args):
    orders, _ = workers
    _same_after(both, workers, clock, orders, action, args)


def _same_after(both, workers, clock, worker, action, args) -> None:
    counts, states = [], []
    for rt in both:
        counts.append(getattr(rt.actions(worker), action)(*args))
        states.append((
            MetricsReader(rt.client).read([w.keys() for w in workers], clock())[0],
            pages(rt, worker, "enqueued", "id", False),
            pages(rt, worker, "morgue", "id", False),
        ))
    assert counts[0] == counts[1] > 0
    assert states[0] == states[1]


def test_a_redis_cluster_scrapes_as_one_redis_does(both: tuple[Runtime, Runtime]) -> None:
    scraped = []
    for rt in both:
        lowkiq.runtime._current = rt
        found = scrape(host_app(LOWKIQ_WEB_METRICS_PER_SHARD=True).test_client())
        scraped.append({key: value for key, value in found.items() if key[0] != "lowkiq_scrape_duration_seconds"})
    standalone, clustered = scraped
    assert clustered == standalone
    assert any(name == "lowkiq_busy" and value for (name, _), value in standalone.items())
