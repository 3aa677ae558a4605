"""Redis CPU of the hot script, alone: one thread takes and acknowledges batch_size 1 jobs of one
shard as fast as it can on a warm Redis, and ``INFO commandstats`` says what each call cost.

    python -m bench.script_cost [--jobs 20000] [--batch 1]
    python -m bench.script_cost --steps [--jobs 4000] [--runs 3] [--batch -16]

``--steps`` says where a call's time goes: the hot script is run cut after each of its steps (each cut
returns at once, on fresh queues of the same shape), so a step costs the difference between two cuts;
and the floor: a script that runs the same Redis commands as one take and ack at batch 1 and nothing
else, which is what any script keeping this data layout pays. ``--batch -16`` is a take-ahead call of 16
ids (docs/take-ahead.md): the steps are then per call of 16 jobs (the floor stays batch 1's).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lowkiq
from bench.common import RedisCounters, hold
from bench.redis_server import RedisServer
from lowkiq.store import lua
from lowkiq.store.keys import lua_prelude

# Where the hot script is cut, in order: (what the step adds, the line of ack_and_take.lua it ends before).
STEPS = (
    ("the library's functions (closures built per call)", "local limit, grant, ttl"),
    ("the lease: TIME, HMGET and the fencing check", "-- Retried ids, stored errors"),
    ("the ack: one EXISTS for the rare keys, HDEL, HINCRBY", "local fair = false"),
    ("the due ids and the next head: ZRANGE by rank", "  if #ready > 0 then\n    local any_retries"),
    ("each job: its payloads (one HMGET for the batch), its record", "    call_chunked('HSET', K_PROCESSING"),
    ("the move: HSET processing, ZREM ready and lex, HDEL payloads", "    -- the thread and the history length"),
    ("the lease renewed: HSET", "if taken or #acked > 0 then history_held"),
)
CUT = "do return {false, '0', ''} end\n"

# A script that only returns a job-shaped reply: what the call itself costs, with the shard's keys.
EMPTY = "return { false, '0', '' }"

# The fewest commands a fenced take and ack of one job can be: the lease checked (not renewed), the ack, the
# take by rank, the job moved into processing, one history entry; no id index for the console, no counter,
# no probe for retried or grouped ids. Not a layout lowkiq could keep (the console and the SPEC need the
# rest): a lower bound for any layout of the same kind.
MINIMAL = """
local t = redis.call('TIME')
local lease = redis.call('HMGET', K_LEASE, 'grant', 'state', 'expires_ms')
if lease[1] ~= ARGV[3] then return redis.error_reply('FENCED') end
if ARGV[7] then redis.call('HDEL', K_PROCESSING, ARGV[7]) end
local first = redis.call('ZRANGE', K_READY, 0, 1, 'WITHSCORES')
local id = first[1]
local record = redis.call('HGET', K_PAYLOADS, id)
redis.call('HSET', K_PROCESSING, id, record)
redis.call('ZREM', K_READY, id)
redis.call('HDEL', K_PAYLOADS, id)
redis.call('XADD', K_EVENTS, 'MAXLEN', '~', 10000, '*', 'k', 'run', 'd', id)
return { first[4] or false, id, record }
"""

# The same Redis commands as one take and ack at batch 1 in a plain shard, and no other work.
FLOOR = """
local t = redis.call('TIME')
local lease = redis.call('HMGET', K_LEASE, 'grant', 'state', 'expires_ms', 'owner', 'cfg_epoch', 'fence', 'history',
  'thread')
if lease[1] ~= ARGV[3] then return redis.error_reply('FENCED') end
redis.call('EXISTS', K_RETRIES, K_ERRORS, K_CRASHES, K_GROUP_OF, K_GROUPS, K_FIRST)
local acked = {}
if ARGV[7] then
  redis.call('HINCRBY', K_COUNTERS, 'processed', redis.call('HDEL', K_PROCESSING, ARGV[7]))
  acked[1] = ARGV[7]
end
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ready = redis.call('ZRANGE', K_READY, 0, 1, 'WITHSCORES')
if tonumber(ready[2]) > tonumber(t[1]) + tonumber(t[2]) / 1e6 then return { ready[2] } end
local id = ready[1]
local record = cmsgpack.pack(-1, tonumber(ready[2]), false) .. redis.call('HGET', K_PAYLOADS, id)
redis.call('HSET', K_PROCESSING, id, record)
redis.call('ZREM', K_READY, id)
redis.call('ZREM', K_LEX, id)
redis.call('HDEL', K_PAYLOADS, id)
redis.call('HSET', K_LEASE, 'expires_ms', now_ms + 60000, 'taken_ms', now_ms)
redis.call('XADD', K_EVENTS, 'MAXLEN', '~', 10000, '*', 'k', 'run', 'd',
  cmsgpack.pack({ lease[4], lease[5] .. ':' .. lease[6], ARGV[5], acked, { id } }))
return { ready[4] or false, id, record }
"""


@contextmanager
def queued(url: str, client: Any, jobs: int, batch: int, **attributes: object) -> Iterator[tuple[Any, Any]]:
    """A fresh one-shard queue of ``jobs`` jobs and its lease, held for this process: (queue, lease).
    ``attributes``: more of the worker's class attributes (e.g. history_length=0)."""
    client.flushall()
    worker = type("CostWorker", (lowkiq.Worker,), {"shards_count": 1, "batch_size": batch, "__module__": __name__,
                                                   "perform": lambda self, payloads_by_id: None, **attributes})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        for start in range(0, jobs, 10_000):
            worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + 10_000))])
        queue = runtime.queue(worker)
        yield queue, hold(queue, 0, "cost", ttl=600)
    finally:
        runtime.close()


def measure(url: str, client: Any, jobs: int, batch: int, **attributes: object) -> dict[str, Any]:
    """``attributes``: more of the worker's class attributes (e.g. history_length=0)."""
    with queued(url, client, jobs, max(1, batch), **attributes) as (queue, lease):
        wire = lua.Wire(queue.client)
        counters = RedisCounters(client).start()
        started, cpu_started = time.perf_counter(), time.process_time()
        acked: list[str] = []
        taken = 0
        while True:
            got = queue.ack_and_take((lease, acked) if acked else None, (lease, batch), thread="t", wire=wire)
            if not got.jobs:
                break
            taken += len(got.jobs)
            acked = [j.id for j in got.jobs]
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        counters.stop()
        wire.close()
    calls = counters.calls("evalsha")
    return {"jobs": taken, "calls": calls, "usec_per_call": counters.usec_per_call("evalsha"),
            "redis_cpu_per_job_us": counters.cpu_seconds / taken * 1e6, "wall_per_job_us": wall / taken * 1e6,
            "python_cpu_per_job_us": cpu / taken * 1e6,
            "commands": {k: v for k, v in ((c, counters.usec_per_call(c)) for c in counters.commandstats)}}


def per_call(url: str, client: Any, source: str, jobs: int, batch: int = 1) -> float:
    """Redis CPU (µs) per call of ``source`` run as the hot script taking ``batch`` ids (-K: K taken ahead),
    on a fresh queue of ``jobs``."""
    with queued(url, client, jobs, max(1, batch)) as (_, lease):
        keys = lease.keys.all()
        sha = client.script_load(source)
        client.config_resetstat()
        acked: list[Any] = []
        for _ in range(jobs // abs(batch)):
            reply = client.evalsha(sha, len(keys), *keys, "", batch, lease.grant, 600_000, "t", 10_000, *acked)
            acked = reply[1::2] if len(reply) % 2 else reply[1:-1:2]
        return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def cuts() -> list[tuple[str, str]]:
    """(what the step adds, the hot script cut after it), from the call alone to the whole script."""
    source = lua.script("ack_and_take").source
    out = [("the call: EVALSHA, its keys and arguments", lua_prelude() + CUT)]
    for label, anchor in STEPS:
        at = source.find(anchor)
        if at < 0:
            raise RuntimeError(f"ack_and_take.lua no longer has the line {anchor!r}: update STEPS in {__name__}")
        out.append((label, source[:at] + CUT + source[at:]))
    out.append(("the history entry: XADD", source))
    return out


def steps(url: str, client: Any, jobs: int, runs: int, batch: int = 1) -> dict[str, Any]:
    """Each step's Redis CPU per call (median of ``runs``, the variants taken in turn), the whole script's, the floor's."""
    variants = [*cuts(), ("empty", lua_prelude() + EMPTY), ("minimal", lua_prelude() + MINIMAL),
                ("floor", lua_prelude() + FLOOR)]
    costs: dict[str, list[float]] = {label: [] for label, _ in variants}
    for _ in range(runs):
        for label, source in variants:
            costs[label].append(per_call(url, client, source, jobs, 1 if label in ("minimal", "floor") else batch))
    cut = [statistics.median(costs[label]) for label, _ in variants[:-3]]
    added = [(variants[0][0], cut[0])] + [(variants[i][0], cut[i] - cut[i - 1]) for i in range(1, len(cut))]
    return {"steps": added, "whole": cut[-1], **{name: statistics.median(costs[name]) for name in ("empty", "minimal", "floor")}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=None, help="jobs per run (default 20,000; 4,000 with --steps)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", action="store_true", help="where a call's time goes, and the floor")
    args = parser.parse_args()
    if args.steps:
        with RedisServer() as server:
            found = steps(server.url, server.client(), args.jobs or 4_000, args.runs, args.batch)
        for label, usec in found["steps"]:
            print(f"{usec:6.2f} µs  {label}")
        print(f"{found['whole']:6.2f} µs  the whole script, per call")
        print(f"{found['floor']:6.2f} µs  the floor: the same Redis commands and nothing else")
        print(f"{found['minimal']:6.2f} µs  the fewest commands of a fenced take and ack (9)")
        print(f"{found['empty']:6.2f} µs  a script that only returns, with the shard's keys")
        return
    args.jobs = args.jobs or 20_000
    with RedisServer() as server:
        client = server.client()
        for _ in range(args.runs):
            m = measure(server.url, client, args.jobs, args.batch)
            print(f"{m['jobs']} jobs, {m['calls']} calls: evalsha {m['usec_per_call']:.2f} µs/call, "
                  f"Redis CPU {m['redis_cpu_per_job_us']:.2f} µs/job, "
                  f"this process's CPU {m['python_cpu_per_job_us']:.1f} µs/job, "
                  f"wall {m['wall_per_job_us']:.1f} µs/job")
        print({k: round(v, 2) for k, v in m["commands"].items()})


if __name__ == "__main__":
    main()
