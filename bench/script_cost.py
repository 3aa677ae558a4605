"""Redis CPU of the hot script, alone: one thread takes and acknowledges batch_size 1 jobs of one
shard as fast as it can on a warm Redis, and ``INFO commandstats`` says what each call cost.

    python -m bench.script_cost [--jobs 20000] [--batch 1]
    python -m bench.script_cost --steps [--jobs 4000] [--runs 3] [--batch -16]
    python -m bench.script_cost --push-steps [--calls 3000] [--ids-per-call 10] [--shards 1000] [--runs 3] [--micro]
    python -m bench.script_cost --push-before REV [--ids-per-call 1] [--ids 1000] [--shards 1000] [--pairs 6] [--micro]

``--steps`` says where a call's time goes: the hot script is run cut after each of its steps (each cut
returns at once, on fresh queues of the same shape), so a step costs the difference between two cuts;
and the floor: a script that runs the same Redis commands as one take and ack at batch 1 and nothing
else, which is what any script keeping this data layout pays. ``--batch -16`` is a take-ahead call of 16
ids (docs/take-ahead.md): the steps are then per call of 16 jobs (the floor stays batch 1's).

``--push-steps`` does the same for the producer's script, push.lua: each call enqueues ``--ids-per-call`` new ids
into one shard, as ``perform_async`` packs them (``--ids-per-call 1`` is a one-job ``perform_async``); with
``--shards 1000`` the calls are those of ``perform_async`` calls of 1,000 × ``--ids-per-call`` jobs into 1,000 shards
(10: issue 39's 10,000 jobs into 1,000 shards). ``--push-before REV`` runs push.lua as it was at git revision REV
(as REV's own code assembles it) and today's on the same calls, in alternating turns. ``--micro``: into shards
migrated to integer microsecond scores, as a running server leaves them (without it, in seconds, as a queue no
server has served yet). At 1,000 shards ``--calls`` sets how full the shards get: 3,000 calls of 10 ids leave
about 30 jobs in each, 10,000 about 100 (a shard of fewer than 128 keeps its sorted sets and hash as listpacks,
walked on each write).

Every variant runs in a Lua interpreter of its own (``SCRIPT FLUSH`` before its turn), so that one variant's
garbage is not collected on another's time.
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
from lowkiq.store import lua, score_units
from lowkiq.store.keys import lua_prelude

# Where the hot script is cut, in order: (what the step adds, the line of ack_and_take.lua it ends before).
STEPS = (
    ("the library's functions (closures built per call)", "local limit, grant, ttl"),
    ("the lease: TIME, HMGET and the fencing check", "-- Retried ids, stored errors"),
    ("the ack: one EXISTS for the rare keys, HDEL, HINCRBY", "local fair = false"),
    ("the due ids and the next head: ZRANGE by rank", "  if #ready > 0 then\n    local any_retries"),
    ("each job: its payloads (one HMGET for the batch), its record", "    call_chunked('HSET', K_PROCESSING"),
    ("the move: HSET processing, ZREMRANGEBYRANK ready, ZREM lex, HDEL payloads", "    -- the thread and the history length"),
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
        # A Lua interpreter of its own: another variant's garbage would be collected on this one's time.
        client.script_flush()
        sha = client.script_load(source)
        acked: list[Any] = []
        calls = jobs // abs(batch)
        for n in range(calls):
            if n == calls // 10:  # the first tenth warms the interpreter up
                client.config_resetstat()
            reply = client.evalsha(sha, len(keys), *keys, "", batch, lease.grant, 600_000, "t", 10_000, *acked)
            acked = reply[1::2] if len(reply) % 2 else reply[1:-1:2]
        return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def script_cuts(name: str, steps: tuple[tuple[str, str], ...], cut: str, last: str) -> list[tuple[str, str]]:
    """(what the step adds, script ``name`` cut after it), from the call alone to the whole script, whose last
    step is ``last``."""
    source = lua.script(name).source
    out = [("the call: EVALSHA, its keys and arguments", lua_prelude() + cut)]
    for label, anchor in steps:
        at = source.find(anchor)
        if at < 0:
            raise RuntimeError(f"{name}.lua no longer has the line {anchor!r}: update its steps in {__name__}")
        out.append((label, source[:at] + cut + source[at:]))
    out.append((last, source))
    return out


def cuts() -> list[tuple[str, str]]:
    """The hot script's cuts (``script_cuts``)."""
    return script_cuts("ack_and_take", STEPS, CUT, "the history entry: XADD")


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


# Where the push script is cut, in order: (what the step adds, the line of push.lua it ends before).
PUSH_STEPS = (
    ("the library's functions (closures built per call)", "local jobs = cmsgpack.unpack(ARGV[1])"),
    ("the arguments unpacked and TIME", "-- One slot per distinct id"),
    ("each job: its id indexed, its due time", "-- Merging without decoding."),
    ("the merge's local functions (closures built per call)", "local held = 0"),
    ("the morgue and payload-cap checks (off here)", "-- Fairness indexes (docs/fairness.md)"),
    ("the group probes: EXISTS", "local moved = {}"),
    ("each id: HMGET of what it holds, its record", "-- The shard's earliest job before the writes"),
    ("the shard's head: ZRANGE (when new ids came)", "call_chunked('HSET', K_PAYLOADS"),
    ("the writes: HSET payloads, ZADD ready and lex", "if dropped > 0 then"),
    ("the drop counter and tags (none here)", "history_add(history_length"),
    ("the history entry: XADD", "if head and (#head == 0"),
)
PUSH_CUT = "do return {0, 0} end\n"


def push_cuts() -> list[tuple[str, str]]:
    """push.lua's cuts (``script_cuts``)."""
    return script_cuts("push", PUSH_STEPS, PUSH_CUT, "the wake-up: PUBLISH when the shard had no earlier job")


def push_costs(url: str, client: Any, sources: dict[str, str], calls: int, per_call: int,
               block: int = 200, pool: int = 0, shards: int = 1, micro: bool = False) -> dict[str, float]:
    """Redis CPU (µs) per call of each of ``sources`` run as push.lua, each call ``per_call`` new ids (with ``pool``,
    ids taken in turn from that many: once each is queued, a push merges a version into it). With ``shards``
    above 1, the calls are those of ``perform_async`` calls of ``shards`` × ``per_call`` new jobs into a worker
    of that many shards (about ``per_call`` ids per script, in small shards: issue 39's 10,000 jobs into 1,000).

    Each source gets its own fresh one-shard queue and the same calls; the sources take turns every ``block``
    calls, so that the machine's load, shared with others, weighs on all alike.
    """
    from lowkiq.jobs import prepare

    client.flushall()
    scripted: dict[str, list[tuple[list[str], Any]]] = {}
    for n, label in enumerate(sources):
        worker = type(f"PushCost{n}", (lowkiq.Worker,), {"shards_count": shards, "__module__": __name__,
                                                         "perform": lambda self, payloads_by_id: None})
        runtime = lowkiq.configure(workers=[worker], redis_url=url)
        queue = runtime.queue(worker)
        if micro:  # shards written in integer microseconds, as a server leaves them (bench.score_units)
            lua.run_many(runtime.client, [score_units.migrate_call(shard) for shard in queue.keys.shards()])
        scripted[label] = []
        dump = runtime.settings.dump_payload
        while shards > 1 and len(scripted[label]) < calls:
            first = len(scripted[label]) * per_call
            jobs = [{"id": f"{first + k}", "payload": {"n": first + k}} for k in range(shards * per_call)]
            scripted[label] += [(keyset.all(), args) for _, keyset, args in queue.push_calls(prepare(jobs, now=None,
                                                                                                    dump_payload=dump))[0]]
        for c in range(calls if shards == 1 else 0):
            numbers = [c * per_call + k for k in range(per_call)]
            jobs = [{"id": f"{n % pool}" if pool else f"{n}", "payload": {"n": n}} for n in numbers]
            (_, keyset, args), = queue.push_calls(prepare(jobs, now=None, dump_payload=dump))[0]
            scripted[label].append((keyset.all(), args))
        runtime.close()
    usec = {label: 0.0 for label in sources}
    calls = min(len(rows) for rows in scripted.values())
    for start in range(0, calls, block):
        for label in sources:
            # A Lua interpreter of its own: another variant's garbage would be collected on this one's time.
            client.script_flush()
            sha = client.script_load(sources[label])
            client.config_resetstat()
            for keys, args in scripted[label][start : start + block]:
                client.evalsha(sha, len(keys), *keys, *args)
            usec[label] += float(client.info("commandstats")["cmdstat_evalsha"]["usec"])
    return {label: total / calls for label, total in usec.items()}


def push_steps(url: str, client: Any, calls: int, per_call: int, runs: int, shards: int = 1,
               micro: bool = False) -> dict[str, Any]:
    """Each step of push.lua's Redis CPU per call (median of ``runs``; the cuts take turns), and the whole."""
    variants = dict(push_cuts())
    costs: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(runs):
        for label, usec in push_costs(url, client, variants, calls, per_call, shards=shards, micro=micro).items():
            costs[label].append(usec)
    cut = [statistics.median(costs[label]) for label in variants]
    labels = list(variants)
    added = [(labels[0], cut[0])] + [(labels[i], cut[i] - cut[i - 1]) for i in range(1, len(cut))]
    return {"steps": added, "whole": cut[-1]}


def source_at(revision: str, name: str) -> str:
    """Script ``name`` as git revision ``revision`` assembles it: that revision's lowkiq, exported to a temporary
    folder, asked in a subprocess (its scripts and its assembly, whatever either was then)."""
    import os
    import subprocess
    import sys
    import tempfile

    from bench import ROOT

    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", revision, "lowkiq"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        return subprocess.run([sys.executable, "-c", f"from lowkiq.store import lua; print(lua.script({name!r}).source, end='')"],
                              cwd=folder, env={**os.environ, "PYTHONPATH": folder}, check=True, capture_output=True,
                              text=True).stdout


def push_versus(url: str, client: Any, revision: str, calls: int, per_call: int, pairs: int,
                pool: int = 0, shards: int = 1, micro: bool = False) -> list[tuple[float, float]]:
    """(before, after) Redis CPU per push call (µs) of push.lua at ``revision`` and today's, ``pairs`` times, taking
    turns within each (who starts alternates)."""
    before, after = source_at(revision, "push"), lua.script("push").source
    out = []
    for n in range(pairs):
        sources = {"before": before, "after": after} if n % 2 == 0 else {"after": after, "before": before}
        found = push_costs(url, client, sources, calls, per_call, pool=pool, shards=shards, micro=micro)
        out.append((found["before"], found["after"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=None, help="jobs per run (default 20,000; 4,000 with --steps)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", action="store_true", help="where a call's time goes, and the floor")
    parser.add_argument("--push-steps", action="store_true", help="where a push call's time goes")
    parser.add_argument("--calls", type=int, default=3_000, help="push calls per run (--push-steps)")
    parser.add_argument("--ids-per-call", type=int, default=10, help="new ids per push call (--push-steps)")
    parser.add_argument("--push-before", metavar="REV", help="push.lua at REV against today's, alternating pairs")
    parser.add_argument("--pairs", type=int, default=6, help="pairs for --push-before")
    parser.add_argument("--shards", type=int, default=1,
                        help="push scripts of perform_async calls of shards × ids-per-call jobs into that many shards")
    parser.add_argument("--ids", type=int, default=0,
                        help="--push-before: ids taken in turn from this many (0: every id new), so pushes merge")
    parser.add_argument("--micro", action="store_true",
                        help="push scripts into shards migrated to integer microsecond scores, as a server leaves them")
    args = parser.parse_args()
    if args.push_before:
        with RedisServer() as server:
            found = push_versus(server.url, server.client(), args.push_before, args.calls, args.ids_per_call, args.pairs,
                                args.ids, args.shards, args.micro)
        shape = f"ids taken in turn from {args.ids}" if args.ids else "new ids"
        where = "one shard" if args.shards == 1 else f"{args.shards:,} shards"
        print(f"push.lua, {args.ids_per_call} job(s) per call into {where} ({shape}), Redis CPU per call "
              f"(µs), {args.push_before} → today, in pairs:")
        for before, after in found:
            print(f"{before:7.2f} → {after:7.2f}  ({after / before:.3f}×)")
        print(f"median {statistics.median(b for b, _ in found):.2f} → {statistics.median(a for _, a in found):.2f}, "
              f"median of the ratios {statistics.median(a / b for b, a in found):.3f}×")
        return
    if args.push_steps:
        with RedisServer() as server:
            found = push_steps(server.url, server.client(), args.calls, args.ids_per_call, args.runs, args.shards,
                               args.micro)
        where = "one shard" if args.shards == 1 else f"{args.shards:,} shards (about that many per script)"
        print(f"push.lua, {args.ids_per_call} new id(s) per call into {where}, Redis CPU per call:")
        for label, usec in found["steps"]:
            print(f"{usec:6.2f} µs  {label}")
        print(f"{found['whole']:6.2f} µs  the whole script, per call ({found['whole'] / args.ids_per_call:.2f} µs per id)")
        return
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
