"""streaq: one worker process, run by ``worker.run_sync()``.

Not ``streaq run``: that CLI always logs two INFO lines per task, which the
other queues here do not pay for. ``concurrency`` is BENCH_CONCURRENCY (5
unless told; bench.ordering runs it at 1 too), ``prefetch`` streaq's default
(as many again). The tasks are declared with ``ttl=0``: streaq's ``task``
documents ``ttl`` as the time results are stored, and 0 stores none (the
default keeps each 5 minutes). Enqueue is ``worker.enqueue_many`` (one pipeline
per 10,000 tasks), streaq's documented bulk path; the ordering producer sends
one task at a time, as an application would.
"""

import asyncio
import logging
import os
import time

from streaq import Worker

from bench.peers.marks import URL, apply_version, mark, send_versions_async

worker = Worker(redis_url=URL, concurrency=int(os.environ.get("BENCH_CONCURRENCY", "5")), queue_name="bench")


@worker.task(name="blank", ttl=0)
async def blank(i: int) -> None:
    mark()


@worker.task(name="apply", ttl=0)
async def apply(job_id: str, version: int, work: float) -> None:
    await asyncio.sleep(work / 1000)
    apply_version(job_id, version)


def work() -> None:
    logging.basicConfig(level=logging.WARNING)
    worker.run_sync()


def produce(n: int) -> None:
    async def main() -> None:
        async with worker:
            started = time.perf_counter()
            for start in range(0, n, 10_000):
                await worker.enqueue_many([blank.enqueue(i) for i in range(start, min(n, start + 10_000))])
            print(time.perf_counter() - started)

    asyncio.run(main())


def produce_versions(path: str) -> None:
    async def main() -> None:
        async with worker:
            await send_versions_async(lambda job_id, version, work: apply.enqueue(job_id, version, work), path)

    asyncio.run(main())
