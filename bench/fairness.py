"""What fairness costs (docs/fairness.md): ``python -m bench.fairness [--jobs N] [--rounds R]``.

The same store-level workload three ways in one run, on a private redis-server: push N jobs, then drain
them with ack_and_take (batch 10, one thread: the server's hot path without a perform): Lowkiq's shape
(no groups), the same with 100 groups, and the same with one group. Rounds alternate, and the median is
reported. Redis CPU per job is INFO commandstats' usec of EVALSHA over the jobs; round trips per batch are
EVALSHA calls of the drain over its batches. ``python -m bench.versus`` runs ``one_run`` on two versions of
the code (``--workload fairness-plain``) and also reports the push's and the drain's share of that Redis CPU
and the commands Redis runs per batch of the drain, those inside the script included.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import lowkiq
from lowkiq.store.leases import Lease

from .common import hold
from .redis_server import RedisServer

BATCH = 10


class Fair(lowkiq.Worker):
    shards_count = 4
    batch_size = BATCH

    def perform(self, payloads_by_id: Any) -> None:
        pass


def evalsha(client: Any) -> tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


def commands(client: Any) -> int:
    """Commands Redis has run, those inside scripts included."""
    return int(client.info("stats")["total_commands_processed"])


def one_run(client: Any, jobs: int, groups: int) -> dict[str, float]:
    client.flushall()
    queue = lowkiq.current().queue(Fair)
    leases = []
    for shard in range(Fair.shards_count):
        lease = hold(queue, shard, "bench", ttl=600)
        assert isinstance(lease, Lease)
        leases.append(lease)
    batch = [{"id": i, "payload": {"v": i}, **({"group": f"g{i % groups}"} if groups else {})} for i in range(jobs)]
    client.config_resetstat()
    started = time.perf_counter()
    for i in range(0, jobs, 1000):
        Fair.perform_async(batch[i : i + 1000])
    pushed = time.perf_counter()
    calls_before, usec_before = evalsha(client)
    commands_before = commands(client)
    batches = done = 0
    for lease in leases:
        acked: list[str] = []
        while True:
            taken = queue.ack_and_take((lease, acked) if acked else None, (lease, BATCH))
            assert taken is not None
            acked = [job.id for job in taken.jobs]
            batches += 1
            done += len(acked)
            if not acked:
                break
    drained = time.perf_counter()
    commands_drain = commands(client) - commands_before - 1  # less the INFO that read commands_before
    calls, usec = evalsha(client)
    assert done == jobs, (done, jobs)
    return {"push_per_s": jobs / (pushed - started), "drain_per_s": jobs / (drained - pushed),
            "usec_per_job": usec / jobs, "scripts_per_batch": (calls - calls_before) / batches,
            "push_usec_per_job": usec_before / jobs, "drain_usec_per_job": (usec - usec_before) / jobs,
            "commands_per_batch": commands_drain / batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--plain-only", action="store_true",
                        help="only Lowkiq's shape: to run the same workload on code from before groups")
    options = parser.parse_args()
    shapes = {"no groups (Lowkiq's shape)": 0, "100 groups": 100, "1 group": 1}
    if options.plain_only:
        shapes = {"no groups (Lowkiq's shape)": 0}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in shapes}
    with RedisServer() as server:
        lowkiq.configure(redis_url=server.url, workers=[Fair])
        client = server.client()
        for _ in range(options.rounds):
            for name, groups in shapes.items():
                results[name].append(one_run(client, options.jobs, groups))
    print(f"{options.jobs:,} jobs, 4 shards, batch {BATCH}, median of {options.rounds} alternating rounds")
    print("| shape | push jobs/s | drain jobs/s | Redis CPU per job (EVALSHA µs) | scripts per batch |")
    print("| --- | --- | --- | --- | --- |")
    for name, runs in results.items():
        med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(f"| {name} | {med['push_per_s']:,.0f} | {med['drain_per_s']:,.0f} | {med['usec_per_job']:.1f} "
              f"| {med['scripts_per_batch']:.2f} |")


if __name__ == "__main__":
    main()
