"""streaq: one worker process, ``concurrency=5``, run by ``worker.run_sync()``.

Not ``streaq run``: that CLI always logs two INFO lines per task, which the
other queues here do not pay for. Enqueue is ``worker.enqueue_many`` (one
pipeline per 10,000 tasks), streaq's documented bulk path.
"""

import asyncio
import logging
import time

from streaq import Worker

from bench.peers.marks import URL, mark

worker = Worker(redis_url=URL, concurrency=5, queue_name="bench")


@worker.task(name="blank")
async def blank(i: int) -> None:
    mark()


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
