"""taskiq with taskiq-redis's RedisStreamBroker (the one with acknowledgements), no result backend.

``taskiq worker bench.peers.taskiq_app:broker --workers 1 --max-async-tasks N
--log-level WARNING`` (at INFO its receiver logs every task). No result
backend: taskiq's default is none, nothing is written per task. taskiq has no
bulk send: the producers await ``task.kiq`` once per job, after
``broker.startup()``, which creates the consumer group before the first
message (the group starts at the stream's end, "$").
"""

import asyncio
import time

from taskiq_redis import RedisStreamBroker

from bench.peers.marks import URL, apply_version, mark, send_versions_async

broker = RedisStreamBroker(url=URL, queue_name="bench")


@broker.task(task_name="blank")
async def blank(i: int) -> None:
    mark()


@broker.task(task_name="apply")
async def apply(job_id: str, version: int, work: float) -> None:
    await asyncio.sleep(work / 1000)
    apply_version(job_id, version)


def produce(n: int) -> None:
    async def main() -> None:
        await broker.startup()
        started = time.perf_counter()
        for i in range(n):
            await blank.kiq(i)
        print(time.perf_counter() - started)
        await broker.shutdown()

    asyncio.run(main())


def produce_versions(path: str) -> None:
    async def main() -> None:
        await broker.startup()
        await send_versions_async(lambda job_id, version, work: apply.kiq(job_id, version, work), path)
        await broker.shutdown()

    asyncio.run(main())
