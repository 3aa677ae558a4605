"""saq: ``saq bench.peers.saq_app.settings --workers 1`` (concurrency 5, its CLI logs errors only).

saq has no bulk enqueue (``Queue.map`` also waits for the results), so the
producer awaits ``queue.enqueue`` once per job.
"""

import asyncio
import time

from saq import Queue

from bench.peers.marks import URL, mark

queue = Queue.from_url(URL, name="bench")


async def blank(ctx, *, i):
    mark()


settings = {"queue": queue, "functions": [blank], "concurrency": 5}


def produce(n: int) -> None:
    async def main() -> None:
        await queue.connect()
        started = time.perf_counter()
        for i in range(n):
            await queue.enqueue("blank", i=i)
        print(time.perf_counter() - started)
        await queue.disconnect()

    asyncio.run(main())
