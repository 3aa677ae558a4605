"""bench.async_io's lowkiq side: an async worker whose perform awaits each id's work once, then records every
version of the id in order (the peers' script, bench/peers/marks.py, loaded by path as in bench/apps/ordering.py).

BENCH_SHARDS_COUNT (500) shards, BENCH_CONCURRENCY (200) batches in flight on the server's event loop. Lowkiq's
shape with blank async performs is bench/apps/blank.py's (BENCH_ASYNC=1).
"""

import asyncio
import importlib.util
import os
from pathlib import Path

import lowkiq

_spec = importlib.util.spec_from_file_location("bench_marks", Path(__file__).resolve().parent.parent / "peers" / "marks.py")
assert _spec is not None and _spec.loader is not None
marks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(marks)


class AsyncIoWorker(lowkiq.Worker):
    shards_count = int(os.environ.get("BENCH_SHARDS_COUNT", "500"))
    batch_size = 1
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "200"))

    async def perform(self, payloads_by_id):
        for job_id, payloads in payloads_by_id.items():
            await asyncio.sleep(payloads[-1]["w"] / 1000)
            for payload in payloads:
                marks.apply_version(job_id, payload["v"])


lowkiq.configure(workers=[AsyncIoWorker])
