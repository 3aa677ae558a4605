"""saq: ``saq bench.peers.saq_app.settings --workers 1`` (its CLI logs errors only).

``concurrency`` is BENCH_CONCURRENCY (5 unless told; bench.ordering runs it at
1 too). Jobs are enqueued with ``ttl=-1``: saq's ``Job`` documents it as "disabled",
the finished job is deleted instead of kept 600 s with its result. saq has no
bulk enqueue (``Queue.map`` also waits for the results), so the producers await
``queue.enqueue`` once per job.
"""

import asyncio
import os
import time

from saq import Queue

from bench.peers.marks import URL, apply_version, mark, send_versions_async

queue = Queue.from_url(URL, name="bench")


async def blank(ctx, *, i):
    mark()


async def apply(ctx, *, job_id, version, work):
    await asyncio.sleep(work / 1000)
    apply_version(job_id, version)


settings = {"queue": queue, "functions": [blank, apply], "concurrency": int(os.environ.get("BENCH_CONCURRENCY", "5"))}


def produce(n: int) -> None:
    async def main() -> None:
        await queue.connect()
        started = time.perf_counter()
        for i in range(n):
            await queue.enqueue("blank", i=i, ttl=-1)
        print(time.perf_counter() - started)
        await queue.disconnect()

    asyncio.run(main())


def produce_versions(path: str) -> None:
    async def main() -> None:
        await queue.connect()
        await send_versions_async(
            lambda job_id, version, work: queue.enqueue("apply", job_id=job_id, version=version, work=work, ttl=-1),
            path)
        await queue.disconnect()

    asyncio.run(main())
