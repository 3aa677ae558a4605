"""bench.isolation's app: Lowkiq's shape (many ids, batch_size 1, a trivial perform) with the isolation and
time_limit of BENCH_ISOLATION ("thread" or "process") and BENCH_TIME_LIMIT (seconds, "" for none)."""

import os

import lowkiq

LIMIT = os.environ.get("BENCH_TIME_LIMIT", "")


class IsolationBench(lowkiq.Worker):
    shards_count = 8
    batch_size = 1
    isolation = os.environ.get("BENCH_ISOLATION", "thread")
    time_limit = float(LIMIT) if LIMIT else None

    def perform(self, payloads_by_id):
        pass


lowkiq.configure(workers=[IsolationBench])
