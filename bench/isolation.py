"""What process isolation and time limits cost on Lowkiq's shape: `python -m bench.isolation`.

Many ids, batch_size 1, an empty perform; a real `lowkiq -r` server (2 threads) drains JOBS jobs
enqueued beforehand, for thread isolation without and with a time_limit, and for process isolation,
in alternating rounds of the same run; the drain rate is jobs / (time until the queue is empty,
from the first job taken). Prints the median of each and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .redis_server import RedisServer

APP = Path(__file__).parent / "apps" / "isolation_app.py"
# mode -> (isolation, time_limit, history, schedules): each feature against the same code without it
MODES = {"thread": ("thread", "", "", ""), "thread + time_limit": ("thread", "30", "", ""),
         "process": ("process", "", "", ""), "thread, no history": ("thread", "", "0", ""),
         "thread + schedules": ("thread", "", "", "1")}


def drain(url: str, mode: str, jobs: int) -> float:
    import redis

    import lowkiq

    isolation, limit, history, schedules = MODES[mode]
    client = redis.Redis.from_url(url)
    client.flushall()
    worker = type("IsolationBench", (lowkiq.Worker,), {"shards_count": 8, "__module__": __name__,
                                                        "perform": lambda self, payloads_by_id: None})
    lowkiq.configure(redis_url=url, workers=[worker])
    for start in range(0, jobs, 2000):
        worker.perform_async([{"id": str(i), "payload": i} for i in range(start, min(jobs, start + 2000))])
    env = {**os.environ, "LOWKIQ_REDIS_URL": url, "BENCH_ISOLATION": isolation, "BENCH_TIME_LIMIT": limit,
           "BENCH_HISTORY": history, "BENCH_SCHEDULES": schedules}
    server = subprocess.Popen([str(Path(sys.executable).parent / "lowkiq"), "-r", str(APP), "--threads", "2"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    keys = worker.keys().shards()
    try:
        def left() -> int:
            pipe = client.pipeline()
            for shard in keys:
                pipe.zcard(shard.ids_by_perform_in_zset)
                pipe.hlen(shard.processing_hash)
            return int(sum(pipe.execute()))

        while left() == jobs:  # start-up (leases, children) is not what is measured
            time.sleep(0.005)
        began = time.monotonic()
        first_left = left()
        while left() > 0:
            time.sleep(0.01)
        return first_left / (time.monotonic() - began)
    finally:
        server.terminate()
        server.wait(30)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    with RedisServer() as redis_server:
        for _ in range(args.rounds):
            for mode in MODES:
                rates[mode].append(drain(redis_server.url, mode, args.jobs))
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    for mode, values in rates.items():
        print(f"{mode:22} {medians[mode]:9,.0f} jobs/s  (rounds: {', '.join(f'{v:,.0f}' for v in values)})")
    base = medians["thread"]
    print(f"process / thread: {medians['process'] / base:.2f}")
    for mode in ("thread + time_limit", "thread + schedules"):
        print(f"{mode} / thread: {medians[mode] / base:.3f} (cost {100 * (1 - medians[mode] / base):+.1f}%)")
    print(f"thread (history on, the default) / thread, no history: {base / medians['thread, no history']:.3f} "
          f"(cost {100 * (1 - base / medians['thread, no history']):+.1f}%)")


if __name__ == "__main__":
    main()
