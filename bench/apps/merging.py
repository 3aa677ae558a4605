"""Merging: many versions of few ids. perform counts what it receives, in memory.

When the payloads seen reach BENCH_EXPECTED (every version of every id),
the totals go to Redis: bench:merge (performs, payloads, max_payloads,
out_of_order) and the bench:first / bench:last marks. out_of_order counts
payloads whose score (the version) was not above the last one seen for
that id: it must stay 0.
"""

import os
import threading
import time

import redis

import lowkiq

EXPECTED = int(os.environ["BENCH_EXPECTED"])
PERFORM_SECONDS = float(os.environ.get("BENCH_PERFORM_SECONDS", "0"))  # each perform's own work, slept
_marks = redis.Redis.from_url(os.environ["LOWKIQ_REDIS_URL"])
_lock = threading.Lock()
_last_version = {}
_totals = {"performs": 0, "payloads": 0, "max_payloads": 0, "out_of_order": 0}


class MergeWorker(lowkiq.Worker):
    shards_count = int(os.environ.get("BENCH_SHARDS_COUNT", "5"))
    batch_size = int(os.environ.get("BENCH_BATCH_SIZE", "1"))
    take_ahead = int(os.environ.get("BENCH_TAKE_AHEAD", "16"))

    def perform(self, payloads_by_id):
        if PERFORM_SECONDS:
            time.sleep(PERFORM_SECONDS)
        now = time.time()
        with _lock:
            first = _totals["performs"] == 0
            _totals["performs"] += 1
            for job_id, versions in payloads_by_id.items():
                previous = _last_version.get(job_id, -1)
                for version in versions:
                    if version <= previous:
                        _totals["out_of_order"] += 1
                    previous = version
                _last_version[job_id] = previous
                _totals["payloads"] += len(versions)
                _totals["max_payloads"] = max(_totals["max_payloads"], len(versions))
            last = _totals["payloads"] == EXPECTED
            totals = dict(_totals) if last else None
        if first:
            _marks.set("bench:first", repr(now))
        if last:
            _marks.hset("bench:merge", mapping=totals)
            _marks.set("bench:last", repr(time.time()))


lowkiq.configure(workers=[MergeWorker])
