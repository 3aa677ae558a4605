"""The registry is bounded in workers and shards, and no console read grows with what it holds.

100 workers of 1,000 shards are registered through register(), as servers and producers do; the
stats API and the dashboard's live refresh then read at most the console's budget of shards, in a
bounded number of Redis commands (counted by Redis itself, INFO commandstats), and say which workers
they left out.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

import lowkiq
from lowkiq.store import registry
from lowkiq.store.keys import registry_hash
from lowkiq.store.metrics import CONSOLE_SHARD_BUDGET
from lowkiq.store.registry import MAX_SHARDS_COUNT, MAX_WORKERS, RegistryFull
from lowkiq.webui import create_app


def worker(name: str, shards: int) -> type[lowkiq.Worker]:
    return type(name, (lowkiq.Worker,), {"shards_count": shards, "perform": lambda self, payloads_by_id: None})


def commands(r: redis.Redis) -> int:
    """Commands Redis ran since the last CONFIG RESETSTAT, the INFO that asks left out."""
    stats = r.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def test_the_budget_fits_any_one_worker() -> None:
    assert CONSOLE_SHARD_BUDGET >= MAX_SHARDS_COUNT


def test_registration_past_the_bound_is_refused_whole(r: redis.Redis) -> None:
    registry.register(r, [worker(f"W{i:03d}", 1) for i in range(MAX_WORKERS - 1)])
    before = r.hgetall(registry_hash())
    with pytest.raises(RegistryFull, match=r"cannot register New1, New2: the registry of workers would hold 501, "
                                           r"at most 500 .*Nothing was registered"):
        registry.register(r, [worker("New1", 2), worker("New2", 2)])
    assert r.hgetall(registry_hash()) == before  # nothing half-written
    registry.register(r, [worker("W000", 1), worker("New1", 2)])  # a restart and one more: exactly the bound
    assert r.hlen(registry_hash()) == MAX_WORKERS
    registry.register(r, [worker("W001", 1)])  # a full registry still takes its own workers again
    with pytest.raises(RegistryFull):
        registry.register(r, [worker("New2", 2)])


def test_more_workers_than_the_bound_in_one_call_is_refused_before_redis(r: redis.Redis) -> None:
    with pytest.raises(RegistryFull, match="would hold 501"):
        registry.register(r, [worker(f"W{i:03d}", 1) for i in range(MAX_WORKERS + 1)])
    assert r.hlen(registry_hash()) == 0


def test_a_producer_of_a_new_worker_hears_why_when_the_registry_is_full(r: redis.Redis, configure: Any) -> None:
    registry.register(r, [worker(f"W{i:03d}", 1) for i in range(MAX_WORKERS)])
    late = worker("Late", 2)
    configure(workers=[late])
    with pytest.raises(RegistryFull, match="cannot register Late"):
        late.perform_async([{"id": 1}])


def test_shards_per_worker_are_bounded_at_registration(r: redis.Redis) -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_SHARDS_COUNT}"):
        worker("Huge", MAX_SHARDS_COUNT + 1)


def test_a_registry_filled_by_another_writer_is_read_up_to_the_bound_and_says_so(r: redis.Redis) -> None:
    entry = json.dumps({"queue_name": "q", "shards_count": 1})
    r.hset(registry_hash(), mapping={f"X{i:04d}": entry for i in range(MAX_WORKERS + 200)})
    r.hset(registry_hash(), "Big", "x" * 1_000_000)
    r.config_resetstat()
    workers, broken = registry.read(r)
    assert len(workers) + len(broken) == MAX_WORKERS + 1
    assert broken[-1].name == registry.UNREAD
    assert "holds 701 entries, more than the 500 a console reads" in broken[-1].problem
    assert "201 are not shown" in broken[-1].problem
    assert r.info("stats")["total_net_output_bytes"] < 200_000  # the 1 MB entry never crossed the wire


def test_an_entry_too_long_is_broken_without_being_sent(r: redis.Redis) -> None:
    r.hset(registry_hash(), mapping={"Big": "x" * 1_000_000, "Ok": json.dumps({"queue_name": "q", "shards_count": 1})})
    r.config_resetstat()
    workers, broken = registry.read(r)
    assert [w.name for w in workers] == ["Ok"]
    assert [(b.name, b.problem) for b in broken] == [("Big", "the entry is 1000000 bytes long; at most 4096")]
    assert r.info("stats")["total_net_output_bytes"] < 10_000


@pytest.fixture
def crowded(r: redis.Redis) -> list[type[lowkiq.Worker]]:
    """100 workers of 1,000 shards each, registered as a producer registers them."""
    workers = [worker(f"W{i:03d}", 1000) for i in range(100)]
    registry.register(r, workers)
    return workers


@pytest.mark.slow
def test_stats_and_the_live_refresh_stay_bounded_with_100_workers_of_1000_shards(
        crowded: list[type[lowkiq.Worker]], r: redis.Redis, redis_url: str) -> None:
    http = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    fit = CONSOLE_SHARD_BUDGET // 1000

    r.config_resetstat()
    started = time.perf_counter()
    stats = http.get("/api/v1/stats")
    took = time.perf_counter() - started
    assert stats.status_code == 200, stats.data
    body = stats.get_json()
    assert took < 2.0
    assert sorted(body["by_worker"]) == [f"W{i:03d}" for i in range(fit)]
    assert body["not_measured"]["workers"] == [f"W{i:03d}" for i in range(fit, 100)]
    assert f"one read visits at most {CONSOLE_SHARD_BUDGET:,} shards" in body["not_measured"]["note"]
    # Five commands per shard read (three for its numbers, two for its groups), and a few for the registry and
    # the paused queues.
    assert commands(r) <= 5 * CONSOLE_SHARD_BUDGET + 20

    r.config_resetstat()
    started = time.perf_counter()
    live = http.get("/_live")
    took = time.perf_counter() - started
    assert live.status_code == 200
    assert took < 2.0
    # Eight per shard: the dashboard's six, and two for its biggest groups, which the needs-attention band
    # compares (a group waiting far longer than the others).
    assert commands(r) <= 8 * CONSOLE_SHARD_BUDGET + 50
    page = live.get_data(as_text=True)
    assert f"{100 - fit} not measured" in page
    assert page.count("data-not-measured") == 100 - fit

    dashboard = http.get("/api/v1/dashboard").get_json()
    assert [q["measured"] for q in dashboard["queues"]] == [True] * fit + [False] * (100 - fit)

    metrics = http.get("/metrics").get_data(as_text=True)
    assert f"lowkiq_workers_not_measured {float(100 - fit)}" in metrics
    lengths = [line for line in metrics.splitlines() if line.startswith("lowkiq_queue_length{")]
    assert len(lengths) == fit and 'worker="W000"' in lengths[0]

    # A worker past the budget is measured on its own page.
    counts = http.get("/workers/W099/_counts")
    assert counts.status_code == 200
