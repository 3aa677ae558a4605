"""Item 3: 1,000 ids x 100 versions arriving while the server runs."""

from __future__ import annotations

import time

import redis

import lowkiq

from ..common import (
    MARK_FIRST,
    MARK_LAST,
    ItemResult,
    LowkiqServer,
    RedisCounters,
    Sizes,
    log,
    median,
    spread,
    wait_drained,
    wait_for,
)
from ..options import Options
from ..redis_server import RedisServer


def merge_worker() -> type[lowkiq.Worker]:
    """The bench process's twin of ``bench/apps/merging.py``."""
    return type("MergeWorker", (lowkiq.Worker,), {"shards_count": 5, "batch_size": 1, "__module__": __name__,
                                                  "perform": lambda self, payloads_by_id: None})


def run(sizes: Sizes, options: Options) -> ItemResult:
    ids, versions = sizes.merge_ids, sizes.merge_versions
    total = ids * versions
    result = ItemResult(3, "Merging", f"{ids:,} ids × {versions} versions (payload = version = score), sent "
                        f"version by version ({versions} `perform_async` calls of {ids:,} jobs) while one `lowkiq` "
                        "process (5 threads, lag scheduler, shards_count 5, batch_size 1) runs; end-to-end = first "
                        "enqueue to the perform that saw the last payload")
    runs = []
    held = (1, 10, 100, 1000) if not sizes.smoke else (1, 10)
    costs: dict[int, list[float]] = {n: [] for n in held}
    with RedisServer() as redis_server:
        client = redis_server.client()
        for n in range(sizes.runs):
            log(f"item 3, run {n + 1}/{sizes.runs}")
            runs.append(_once(redis_server.url, client, ids, versions))
            for payloads in held:
                costs[payloads].append(_version_cost(redis_server.url, client, payloads))
    e2e = [r["end_to_end"] for r in runs]
    performs = [r["performs"] for r in runs]
    per = [total / p for p in performs]
    result.row("payloads delivered", spread([r["payloads"] for r in runs], "{:,.0f}"), f"= {total:,}",
               all(r["payloads"] == total for r in runs))
    result.row("performs", spread(performs, "{:,.0f}"))
    result.row("payloads per perform, mean", spread(per, "{:.1f}"))
    result.row("payloads per perform, max", spread([r["max_payloads"] for r in runs], "{:,.0f}"))
    result.row("payloads out of version order", spread([r["out_of_order"] for r in runs], "{:,.0f}"), "0",
               all(r["out_of_order"] == 0 for r in runs))
    result.row("enqueue of all versions while the server runs, s", spread([r["enqueue"] for r in runs]))
    result.row("the same enqueue into an idle Redis (no server), s", spread([r["enqueue_alone"] for r in runs]))
    result.row("end-to-end, s", spread(e2e), "<= 1.5 s", None if sizes.smoke else median(e2e) <= 1.5)
    result.row("payloads/s end-to-end", f"{total / median(e2e):,.0f}")
    for payloads in held:
        result.row(f"Redis CPU of one version pushed into an id holding {payloads:,} payloads, µs",
                   spread(costs[payloads], "{:.1f}"))
    result.note("The cost of one version by the length of its id's stored list: 200 ids each holding that many "
                "payloads, one `perform_async` of one job per id with a higher score (`INFO commandstats`, "
                "the push script's `usec_per_call`). Flat means a version costs O(1) in Redis, whatever it joins "
                "(up to the copy of the stored bytes).")
    result.note("Merging turns versions into fewer performs: while an id waits its turn in its shard, its new "
                "versions join the queued job, so the server runs far fewer performs than payloads. Order: every "
                "id's versions reached perform in ascending order in every run (out-of-order count above).")
    return result


def _serving(client: redis.Redis, worker: type[lowkiq.Worker]) -> bool:
    leases = [shard.lease_hash for shard in worker.keys().shards()]
    return all(client.hget(lease, "state") == b"held" for lease in leases)


def _version_cost(url: str, client: redis.Redis, held: int, ids: int = 200) -> float:
    """Redis µs per push of one new version into an id that holds ``held`` payloads."""
    client.flushall()
    worker = merge_worker()
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        for start in range(0, held, 100):
            worker.perform_async([{"id": i, "payload": v, "score": v} for v in range(start, min(held, start + 100))
                                  for i in range(ids)])
        counters = RedisCounters(client).start()
        for i in range(ids):
            worker.perform_async([{"id": i, "payload": held, "score": held}])
        counters.stop()
    finally:
        runtime.close()
    client.flushall()
    return counters.usec_per_call("evalsha")


def _send(worker: type[lowkiq.Worker], ids: int, versions: int, bursts: bool = False) -> float:
    """Version by version (``versions`` calls of ``ids`` jobs), or id by id (``bursts``: each id's versions in a
    row, one call each, as an app updating one entity in a burst does)."""
    started = time.perf_counter()
    if bursts:
        for i in range(ids):
            for version in range(versions):
                worker.perform_async([{"id": i, "payload": version, "score": version}])
    else:
        for version in range(versions):
            worker.perform_async([{"id": i, "payload": version, "score": version} for i in range(ids)])
    return time.perf_counter() - started


def _once(url: str, client: redis.Redis, ids: int, versions: int, env: dict[str, str] | None = None,
          bursts: bool = False) -> dict[str, float]:
    """``env``: more of the server app's environment (BENCH_TAKE_AHEAD, BENCH_PERFORM_SECONDS); ``bursts``: see
    ``_send``."""
    client.flushall()
    worker = merge_worker()
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    # What merging costs the producer on its own: the same versions, nobody consuming.
    alone = _send(worker, ids, versions, bursts)
    client.flushall()
    try:
        with LowkiqServer("merging", url, env={"BENCH_EXPECTED": str(ids * versions), **(env or {})}) as server:
            # "While the server runs": it holds every shard's lease (a new server first waits
            # `settle` seconds for the membership to stay unchanged), only then start sending.
            wait_for(lambda: _serving(client, worker), timeout=30, alive=server.check_alive,
                     what="the server to serve every shard")
            started = time.time()
            enqueue = _send(worker, ids, versions, bursts)
            drain = wait_drained(client, timeout=600, alive=server.check_alive)
            totals = {k.decode(): float(v) for k, v in client.hgetall("bench:merge").items()}
    finally:
        runtime.close()
    client.delete(MARK_FIRST, MARK_LAST, "bench:merge")
    out = {**totals, "enqueue": enqueue, "enqueue_alone": alone, "end_to_end": drain.last - started}
    log(f"merging: {out['performs']:,.0f} performs for {out['payloads']:,.0f} payloads, "
        f"end-to-end {out['end_to_end']:.2f} s")
    return out
