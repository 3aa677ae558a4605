"""What one more version of an id costs as the id holds more: ``python -m bench.depth [--depths ...] [--versions N]``.

For each depth, on a private redis-server: one id is given ``depth`` payloads (in pushes of 2,000), then
``--versions`` single versions are pushed one call each, and ``INFO commandstats`` says what the push
script cost per call (Redis CPU, microseconds). Rising scores (the common case: versions in order), no
cap. Prints one row per depth and the ratio of the deepest to the shallowest.
"""

from __future__ import annotations

import argparse
from typing import Any

import lowkiq

from .redis_server import RedisServer

SLICE = 2000


def one_depth(url: str, client: Any, depth: int, versions: int) -> float:
    client.flushall()
    worker = type("DepthWorker", (lowkiq.Worker,), {"shards_count": 1, "__module__": __name__,
                                                    "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        for start in range(0, depth, SLICE):
            worker.perform_async([{"id": "hot", "payload": f"v{v}", "score": v}
                                  for v in range(start, min(depth, start + SLICE))])
        client.config_resetstat()
        for v in range(depth, depth + versions):
            worker.perform_async([{"id": "hot", "payload": f"v{v}", "score": v}])
        stats = client.info("commandstats")["cmdstat_evalsha"]
        return float(stats["usec"]) / int(stats["calls"])
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 100, 1_000, 10_000, 100_000])
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with RedisServer() as server:
        client = server.client()
        rows = []
        for depth in args.depths:
            costs = sorted(one_depth(server.url, client, depth, args.versions) for _ in range(args.rounds))
            rows.append((depth, costs[len(costs) // 2]))
            print(f"{depth:>9,} payloads held: {rows[-1][1]:8.1f} µs of Redis CPU per version (median of "
                  f"{args.rounds})", flush=True)
    print(f"deepest / shallowest: {rows[-1][1] / rows[0][1]:.2f}x")


if __name__ == "__main__":
    main()
