"""One measured enqueue into a queue of many shards, shared by ``bench.score_units`` and ``bench.versus``'s
``enqueue-shards`` workload (which runs it under an older lowkiq too: everything is imported at call time)."""

from __future__ import annotations

import time
from typing import Any


def enqueue_into(url: str, client: Any, name: str, shards: int, jobs: int, call: int, micro: bool) -> dict[str, float]:
    """``jobs`` distinct ids enqueued in calls of ``call`` into a fresh queue of ``shards`` shards, migrated to
    integer microsecond scores first when ``micro``: jobs/s, the push scripts' and their ZADDs' Redis CPU per
    job (INFO commandstats), memory per queued job (INFO used_memory delta) and the perform_in zsets' alone
    (MEMORY USAGE)."""
    import lowkiq
    from lowkiq.store import lua

    client.flushall()
    worker = type(name, (lowkiq.Worker,), {"shards_count": shards, "__module__": __name__,
                                           "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        keys = runtime.queue(worker).keys
        if micro:
            from lowkiq.store import score_units

            lua.run_many(runtime.client, [score_units.migrate_call(shard) for shard in keys.shards()])
        worker.perform_async([{"id": "warm", "payload": "0"}])  # scripts loaded, layout recorded
        batches = [[{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + call))]
                   for start in range(0, jobs, call)]
        used = int(client.info("memory")["used_memory"])
        client.config_resetstat()
        started = time.perf_counter()
        for batch in batches:
            worker.perform_async(batch)
        seconds = time.perf_counter() - started
        stats = client.info("commandstats")
        grown = int(client.info("memory")["used_memory"]) - used
        pipe = client.pipeline(transaction=False)
        for shard in keys.shards():
            pipe.memory_usage(shard.ids_by_perform_in_zset, samples=0)
        zsets = sum(int(n or 0) for n in pipe.execute())
    finally:
        runtime.close()
    return {"rate": jobs / seconds, "evalsha": stats.get("cmdstat_evalsha", {"usec": 0})["usec"] / jobs,
            "zadd": stats.get("cmdstat_zadd", {"usec": 0})["usec"] / jobs, "bytes": grown / jobs,
            "zset_bytes": zsets / (jobs + 1)}
