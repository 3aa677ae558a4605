"""taskiq with taskiq-redis's RedisStreamBroker (the one with acknowledgements), no result backend.

``taskiq worker bench.peers.taskiq_app:broker --workers 1 --max-async-tasks 5``.
taskiq has no bulk send: the producer awaits ``blank.kiq(i)`` once per job,
after ``broker.startup()``, which creates the consumer group before the
first message (the group starts at the stream's end, "$").
"""

import asyncio
import time

from taskiq_redis import RedisStreamBroker

from bench.peers.marks import URL, mark

broker = RedisStreamBroker(url=URL, queue_name="bench")


@broker.task(task_name="blank")
async def blank(i: int) -> None:
    mark()


def produce(n: int) -> None:
    async def main() -> None:
        await broker.startup()
        started = time.perf_counter()
        for i in range(n):
            await blank.kiq(i)
        print(time.perf_counter() - started)
        await broker.shutdown()

    asyncio.run(main())
