"""bench.isolation's app: Lowkiq's shape (many ids, batch_size 1, a trivial perform) with the isolation and
time_limit of BENCH_ISOLATION ("thread" or "process") and BENCH_TIME_LIMIT (seconds, "" for none); each id's
history off with BENCH_HISTORY=0; with BENCH_SCHEDULES=1, a schedule every second on another worker (the
server's ticker runs, and its jobs are performed beside the measured ones)."""

import os

import lowkiq

LIMIT = os.environ.get("BENCH_TIME_LIMIT", "")


class IsolationBench(lowkiq.Worker):
    shards_count = 8
    batch_size = 1
    isolation = os.environ.get("BENCH_ISOLATION", "thread")
    time_limit = float(LIMIT) if LIMIT else None
    history_length = 0 if os.environ.get("BENCH_HISTORY") == "0" else lowkiq.Worker.history_length

    def perform(self, payloads_by_id):
        pass


class Ticks(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


if os.environ.get("BENCH_SCHEDULES") == "1":
    lowkiq.configure(workers=[IsolationBench, Ticks], schedules=[lowkiq.Schedule("tick", Ticks, every=1)])
else:
    lowkiq.configure(workers=[IsolationBench])
