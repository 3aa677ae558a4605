"""The dashboard's stall warning against a real redis-server: a worker whose jobs have been due for minutes
and which completed no perform since a sample a minute old is named, with the performs that run long (their
worker, shard, server and thread); one that completed a perform since is not."""

from __future__ import annotations

import time

import pytest
from queue_support import held_lease
from webui_support import WORKERS, OrdersWorker, host_app

from lowkiq.store.minute_totals import MinuteTotalsKeys


@pytest.fixture
def runtime(configure):
    runtime = configure(workers=WORKERS)
    runtime.clock = time.time  # the stall is judged against the samples' Redis time
    return runtime


def sample(r, queue: str, seconds_ago: float, processed: int) -> None:
    """A per-minute sample as the servers write it, taken ``seconds_ago``."""
    at_ms = int((time.time() - seconds_ago) * 1000)
    r.xadd(MinuteTotalsKeys.stream(queue), {"at": at_ms, "processed": processed, "failed": 0, "lag": 0, "length": 0,
                                       "dead": 0}, id=f"{at_ms - at_ms % 60000}-0")


def test_a_stalled_worker_is_named_with_the_performs_that_run_long(runtime, r):
    q = runtime.queue(OrdersWorker)
    OrdersWorker.perform_async([{"id": f"due-{i}", "payload": i, "perform_in": time.time() - 150} for i in range(8)])
    busy_shard = q.shard_of("due-0")
    lease = held_lease(q, busy_shard)
    assert q.ack_and_take(None, (lease, 1)).jobs  # a batch in processing...
    r.hset(lease.keys.lease_hash, mapping={"taken_ms": int((time.time() - 95) * 1000), "thread": "lowkiq-3"})
    sample(r, OrdersWorker.queue_name, 120, 0)  # ...and nothing completed since a sample two minutes old

    client = host_app().test_client()
    live = client.get("/lowkiq/_live").get_data(as_text=True)
    assert 'id="stalled"' in live
    warning = live[live.index('id="stalled"'):live.index("</div>", live.index('id="stalled"'))]
    assert "OrdersWorker</a> has jobs due for" in warning and "completed no perform for 2 min" in warning
    assert f"OrdersWorker shard {busy_shard}</a>" in warning and "(lowkiq-3)" in warning
    assert "(lowkiq-3) for 1 min" in warning  # the perform taken 95 s ago

    # A perform completed since the sample: not stalled, whatever its lag.
    q.ack_and_take((lease, [job.id for job in q.ack_and_take(None, (lease, 1)).jobs]), None)
    live = client.get("/lowkiq/_live").get_data(as_text=True)
    assert 'id="stalled"' not in live


def test_a_calm_system_shows_no_stall(runtime, r):
    OrdersWorker.perform_async([{"id": "fresh", "payload": 1}])
    sample(r, OrdersWorker.queue_name, 120, 0)
    live = host_app().test_client().get("/lowkiq/_live").get_data(as_text=True)
    assert 'id="stalled"' not in live
