"""arq: one worker process, ``max_jobs=5``, run by ``arq.run_worker`` under arq's own interpreter.

Not the ``arq`` CLI: it logs two INFO lines per job. ``poll_delay=0``: arq
takes at most ``queue_read_limit`` (here 100) job ids per poll of its queue
and by default polls every 0.5 s, which held it to about 220 jobs/s on a
trial drain of 1,000 jobs. arq has no bulk enqueue: the producer awaits
``enqueue_job`` once per job.
"""

import asyncio
import logging
import time
from typing import ClassVar

from arq import run_worker
from arq.connections import RedisSettings, create_pool

from bench.peers.marks import URL, mark


async def blank(ctx, i):
    mark()


class WorkerSettings:
    functions: ClassVar = [blank]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = 5
    poll_delay = 0


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
