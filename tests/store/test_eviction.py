"""A Redis that may evict keys when full would drop jobs silently: the server warns at start and the
dashboard says so, naming the node and the fix."""

from __future__ import annotations

import logging
import threading

import pytest
from webui_support import OrdersWorker

from lowkiq.server import Server
from lowkiq.store import eviction
from lowkiq.store.metrics import redis_info
from lowkiq.transport import NodeReply


@pytest.fixture
def policy(r):
    """Sets the test Redis's maxmemory-policy, and puts noeviction back afterwards."""
    def set_policy(value: str) -> None:
        r.config_set("maxmemory-policy", value)

    yield set_policy
    r.config_set("maxmemory-policy", "noeviction")


def test_only_policies_that_may_evict_any_key_put_jobs_at_risk():
    assert [p for p in ("noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl",
                        None, "") if eviction.evicts_jobs(p)] == ["allkeys-lru", "allkeys-lfu", "allkeys-random"]
    # As INFO answers, per node: only primaries count, and a node that did not answer is left out.
    nodes = [NodeReply("a:1", True, b"# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\n"),
             NodeReply("b:1", True, b"maxmemory_policy:noeviction\r\n"),
             NodeReply("c:1", False, b"maxmemory_policy:allkeys-lfu\r\n"),
             NodeReply("d:1", True, b"used_memory:1\r\n"),
             NodeReply("e:1", True, ConnectionError("down"))]
    assert redis_info(nodes)["evicting"] == {"a:1": "allkeys-lru"}


def test_the_dashboard_warns_while_redis_may_evict_jobs(client, runtime, policy, redis_url):
    OrdersWorker.perform_async([{"id": "1"}])
    policy("allkeys-lru")
    page = client.get("/lowkiq/").get_data(as_text=True)
    assert 'id="evicting"' in page and "maxmemory-policy allkeys-lru" in page
    info = client.get("/lowkiq/api/v1/dashboard").get_json()["redis_info"]
    assert info["maxmemory_policy"] == "allkeys-lru" and list(info["evicting"].values()) == ["allkeys-lru"]
    policy("volatile-lru")  # evicts only keys with a time to live: lowkiq's queues have none
    assert 'id="evicting"' not in client.get("/lowkiq/").get_data(as_text=True)
    assert client.get("/lowkiq/api/v1/dashboard").get_json()["redis_info"]["evicting"] == {}


def test_a_server_starting_on_such_a_redis_warns_once(runtime, policy, caplog):
    policy("allkeys-random")
    server = Server(runtime)
    with caplog.at_level(logging.WARNING, logger="lowkiq.server"):
        thread = threading.Thread(target=server.run, kwargs={"handle_signals": False})
        thread.start()
        server.shutdown()
        thread.join(15)
    warnings = [r.getMessage() for r in caplog.records if "may delete queued jobs" in r.getMessage()]
    assert len(warnings) == 1 and "maxmemory-policy allkeys-random" in warnings[0] and "noeviction" in warnings[0]
