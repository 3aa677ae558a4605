"""The search of an id (the header's box, api/v1/search) is bounded per request at the registry's bound: 500 workers
of 4,096 shards each cost a request what finding.SEARCH_WORKERS workers cost, counted by Redis itself (INFO
commandstats), and the answer says which workers it searched and where the next request goes on."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis

import lowkiq
from lowkiq.console.finding import SEARCH_WORKERS
from lowkiq.store import registry
from lowkiq.store.registry import MAX_SHARDS_COUNT, MAX_WORKERS
from lowkiq.webui import create_app


def worker(name: str) -> type[lowkiq.Worker]:
    return type(name, (lowkiq.Worker,), {"shards_count": MAX_SHARDS_COUNT, "perform": lambda self, payloads: None})


def commands(r: redis.Redis) -> dict[str, int]:
    """Commands Redis ran since the last CONFIG RESETSTAT, by name, scripts' own commands included."""
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()
            if k not in ("cmdstat_info", "cmdstat_config|resetstat")}


@pytest.fixture
def crowded(r: redis.Redis, configure: Any) -> list[type[lowkiq.Worker]]:
    """The registry at its bound, as producers register it; one id queued in the last worker."""
    workers = [worker(f"W{i:03d}") for i in range(MAX_WORKERS)]
    registry.register(r, workers)
    configure(workers=[workers[-1]])
    workers[-1].perform_async([{"id": "needle", "payload": 1}])
    return workers


def test_a_search_of_500_workers_of_4096_shards_is_bounded_per_request(crowded, r: redis.Redis,
                                                                        redis_url: str) -> None:
    http = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    http.get("/api/v1/stats")  # the registry read, cached
    r.config_resetstat()
    first = http.get("/api/v1/search", query_string={"id": "needle"})
    assert first.status_code == 200, first.data
    body = first.get_json()
    assert body["found"] == [] and body["searched"] == {"from": 0, "workers": SEARCH_WORKERS, "of": MAX_WORKERS,
                                                        "continue": SEARCH_WORKERS}
    ran = commands(r)
    # Per worker searched: two scripts (queued, dead: range.lua, a few commands each), one HGET (busy), one
    # XREVRANGE (its empty history); a few more for the live servers.
    assert ran.get("evalsha", 0) <= 2 * SEARCH_WORKERS
    assert ran.get("xrevrange", 0) <= SEARCH_WORKERS
    assert sum(ran.values()) <= 10 * SEARCH_WORKERS + 20, ran

    # The next requests go on where each stopped, and the last finds the id in the last worker.
    found, following, requests = [], body["searched"]["continue"], 1
    while following is not None:
        body = http.get("/api/v1/search", query_string={"id": "needle", "from": following}).get_json()
        assert body["searched"]["from"] == following and body["searched"]["workers"] <= SEARCH_WORKERS
        found += [entry["worker"] for entry in body["found"]]
        following = body["searched"]["continue"]
        requests += 1
    assert found == [f"W{MAX_WORKERS - 1:03d}"] and requests == MAX_WORKERS // SEARCH_WORKERS

    # The page says how far it searched and links to the next workers.
    r.config_resetstat()
    page = http.get("/search", query_string={"id": "needle"})
    assert page.status_code == 200
    assert sum(commands(r).values()) <= 10 * SEARCH_WORKERS + 20
    text = page.get_data(as_text=True)
    assert f"Searched workers 1&ndash;{SEARCH_WORKERS} of {MAX_WORKERS}" in text
    assert re.search(rf'id="search-continue" href="/search\?id=needle&amp;from={SEARCH_WORKERS}"', text)
    last = http.get("/search", query_string={"id": "needle", "from": MAX_WORKERS - SEARCH_WORKERS})
    assert last.status_code == 200 and "W499" in last.get_data(as_text=True)
    assert http.get("/api/v1/search", query_string={"id": "needle", "from": "x"}).status_code == 400
    assert http.get("/api/v1/search", query_string={"id": "needle", "from": MAX_WORKERS + 1}).status_code == 400
