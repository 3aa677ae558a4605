"""arq: one worker process, run by ``arq.run_worker`` under arq's own interpreter.

Not the ``arq`` CLI: it logs two INFO lines per job (``→`` and ``←``). Set
for throughput as arq's ``Worker`` documents its settings: ``poll_delay=0``
(arq takes at most ``queue_read_limit``, here 100, job ids per poll and by
default polls every 0.5 s, which held it to about 220 jobs/s on a trial drain
of 1,000 jobs) and ``keep_result=0`` (no result written per job; the default
keeps each for 3,600 s). ``max_jobs`` is BENCH_CONCURRENCY (5 unless told):
bench.ordering runs it at 1 too. arq has no bulk enqueue: the producers await
``enqueue_job`` once per job.
"""

import asyncio
import logging
import os
import time
from typing import ClassVar

from arq import run_worker
from arq.connections import RedisSettings, create_pool

from bench.peers.marks import URL, apply_version, mark, send_versions_async


async def blank(ctx, i):
    mark()


async def apply(ctx, job_id, version, work):
    await asyncio.sleep(work / 1000)
    apply_version(job_id, version)


class WorkerSettings:
    functions: ClassVar = [blank, apply]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "5"))
    poll_delay = 0
    keep_result = 0


def work() -> None:
    logging.basicConfig(level=logging.WARNING)
    run_worker(WorkerSettings)


def produce(n: int) -> None:
    async def main() -> None:
        pool = await create_pool(RedisSettings.from_dsn(URL))
        started = time.perf_counter()
        for i in range(n):
            await pool.enqueue_job("blank", i)
        print(time.perf_counter() - started)
        await pool.aclose()

    asyncio.run(main())


def produce_versions(path: str) -> None:
    async def main() -> None:
        pool = await create_pool(RedisSettings.from_dsn(URL))
        await send_versions_async(lambda job_id, version, work: pool.enqueue_job("apply", job_id, version, work), path)
        await pool.aclose()

    asyncio.run(main())
