"""Item 7: shard leases and the new transport, against the code before them, in one run.

Commit 31e379d is the last commit before shard leases (every ``ack_and_take``
checks and renews the caller's lease; a keeper thread per process beats a
heartbeat and renews idle leases) and the transport layer. It is checked out
into a temporary ``git worktree`` and its server runs as
``python -m lowkiq.cli -r bench/apps/blank.py`` with ``PYTHONPATH`` pointing
there; the current working tree runs the same way through the editable
install. Both drain the same jobs on the same private redis-server, in
alternating order, and Redis's own counters say what each costs per batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis

from .. import ROOT, machine
from ..common import MARK_FIRST, MARK_LAST, ItemResult, LowkiqServer, Sizes, log, median, spread, wait_for
from ..lowkiq_side import _empty, blank_worker
from ..options import Options
from ..profiling import SpyRecorder, summarize
from ..redis_server import RedisServer
from ..versus import worktree

PREVIOUS = "31e379d"
OUT = Path(__file__).resolve().parents[1] / "out"
SHARDS = 5
BATCH_SIZES = (1, 100)
IDLE_FULL, IDLE_SMOKE = 10.0, 1.0  # seconds of an idle server whose background traffic is counted
COUNTED = ("used_cpu_user", "used_cpu_sys", "total_commands_processed", "total_reads_processed",
           "total_writes_processed", "total_net_input_bytes", "total_net_output_bytes")
SCRIPT_COMMANDS = ("evalsha", "evalsha_ro", "eval", "eval_ro")

# Runs under the variant's own lowkiq (its key layout and push script): enqueue, or name its scripts.
ENQUEUE = """
import sys, time, lowkiq
url, jobs, size, shards, batch = sys.argv[1], *map(int, sys.argv[2:])
worker = type("BlankWorker", (lowkiq.Worker,), {"shards_count": shards, "batch_size": batch,
                                               "perform": lambda self, payloads_by_id: None})
runtime = lowkiq.configure(workers=[worker], redis_url=url)
started = time.perf_counter()
for start in range(0, jobs, size):
    worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + size))])
print(time.perf_counter() - started)
runtime.close()
"""
DESCRIBE = """
import json, lowkiq
try:
    from lowkiq.store import lua
except ImportError:  # a tree from before the store package (lowkiq/queue/)
    from lowkiq.queue import lua
print(json.dumps({"file": lowkiq.__file__, "scripts": {lua.script(n).sha: n for n in lua.NAMES}}))
"""


@dataclass
class Variant:
    name: str          # "previous" or "current"
    label: str         # what the tables call it: the commit, and whether the tree differs from it
    pythonpath: str    # "" for the editable install of the working tree
    scripts: dict[str, str] = field(default_factory=dict)  # sha -> script name

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": self.pythonpath}

    def python(self, code: str, *args: object) -> str:
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env={**os.environ, **self.env},
                              cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{self.label}: {done.stderr[-2000:]}")
        return done.stdout.strip()

    def describe(self, expected_root: str) -> None:
        """Which lowkiq this variant imports (it must be its own tree), and its scripts' SHAs."""
        found = json.loads(self.python(DESCRIBE))
        if not os.path.realpath(found["file"]).startswith(os.path.realpath(expected_root) + os.sep):
            raise RuntimeError(f"{self.label} imports lowkiq from {found['file']}, not from {expected_root}")
        self.scripts = found["scripts"]


@dataclass
class Snapshot:
    at: float
    counters: dict[str, float]
    commands: dict[str, tuple[int, float]]  # command -> (calls, usec)
    processed: int
    server_cpu: float
    others_cpu: float  # CPU seconds of every other process on the machine: neither Redis, the server nor the bench


@dataclass
class Drain:
    variant: str
    batch_size: int
    load: float
    enqueue: float
    seconds: float
    jobs: int
    window_jobs: int = 0
    others: float = 0.0            # other processes' CPU in the window, in cores
    round_trips: float = 0.0       # per batch, in the window
    reads: float = 0.0             # requests Redis read, per batch
    script_calls: float = 0.0      # per batch
    commands: float = 0.0          # per batch, those the scripts run included
    redis_cpu_us: float = 0.0      # per job
    evalsha_us: float = 0.0        # per call
    server_cpu_us: float = 0.0     # per job
    bytes_in: float = 0.0          # per job
    bytes_out: float = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


@dataclass
class Idle:
    """An idle server's traffic, per second: what it costs to own shards with nothing to do."""

    seconds: float
    round_trips: float
    redis_cpu_us: float          # per second
    server_cpu_us: float         # per second
    commands: dict[str, tuple[float, float]]  # top-level command or script -> (calls/s, µs/call)


def run(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(
        7, "Leases and transport against the previous code",
        f"{sizes.jobs:,} blank jobs (item 1's: ids 0..{sizes.jobs - 1}, payload str(i)), one `lowkiq` process, "
        f"5 threads, shards_count {SHARDS}, lag scheduler, batch_size 1 and 100; the code of commit {PREVIOUS} "
        "(before shard leases and the transport layer, from a temporary `git worktree`, run as `python -m "
        "lowkiq.cli -r bench/apps/blank.py` with `PYTHONPATH` there) against the current working tree, "
        "alternating on one private redis-server; each variant enqueues with its own code; Redis counters "
        "(`INFO`) are read when the first perform has started and when the last one has ended")
    with worktree(PREVIOUS) as tree, RedisServer() as redis_server:
        previous = Variant("previous", PREVIOUS, tree)
        current = Variant("current", _current_label(), "")
        previous.describe(tree)
        current.describe(ROOT)
        drains: list[Drain] = []
        idle: dict[str, Idle] = {}
        for n in range(sizes.runs):
            # Alternate which goes first, so a machine getting busier or calmer favours neither.
            order = (previous, current) if n % 2 == 0 else (current, previous)
            for batch_size in BATCH_SIZES:
                for variant in order:
                    log(f"item 7, run {n + 1}/{sizes.runs}, batch_size {batch_size}, {variant.name} ({variant.label})")
                    want_idle = variant.name not in idle and batch_size == 1
                    drain, quiet = drain_once(redis_server, variant, sizes, batch_size, idle=want_idle)
                    drains.append(drain)
                    if quiet is not None:
                        idle[variant.name] = quiet
        _report(result, sizes, drains, idle, previous, current)
        for batch_size in _profiled(result, options):
            _profile(result, redis_server, sizes, batch_size, (previous, current))
    return result


def _profiled(result: ItemResult, options: Options) -> list[int]:
    """The batch sizes to profile: every one (``always``), or those whose throughput missed (``auto``)."""
    if options.profile == "never":
        return []
    if options.profile == "always":
        return list(BATCH_SIZES)
    return [b for b in BATCH_SIZES
            if any(r.ok is False and r.metric == f"batch_size {b}: throughput, current / previous" for r in result.rows)]


def _profile(result: ItemResult, redis_server: RedisServer, sizes: Sizes, batch_size: int,
             variants: tuple[Variant, Variant]) -> None:
    """One more drain of each variant under py-spy (not timed: the sampler takes CPU from both)."""
    parts = []
    for variant in variants:
        log(f"item 7, batch_size {batch_size}, {variant.name}: one more drain under py-spy (not timed)")
        path = str(OUT / f"item7-{variant.name}-batch{batch_size}-pyspy.txt")
        Path(path).unlink(missing_ok=True)  # an older run's stacks must not pass for this one's
        drain_once(redis_server, variant, sizes, batch_size, idle=False, profile_to=path)
        profile = summarize(path) if Path(path).exists() else None
        if profile is None:
            result.note("py-spy is not installed or could not attach (`pip install py-spy`): no profile.")
            return
        # The keeper is not under Processor.run, so the summary leaves it out: its samples are counted apart.
        keeper = summarize(path, within="Keeper.run").samples
        beside = (f"the keeper thread held the GIL for {keeper} samples beside the workers' {profile.samples}"
                  if variant.name == "current" else "no keeper thread in this code")
        parts.append(f"**{variant.name}** ({variant.label}; {beside}). " + profile.markdown(limit=10))
    result.note(f"Profiles of the server draining batch_size {batch_size}, one more drain of each code under "
                "py-spy:\n\n" + "\n\n".join(parts))


def _current_label() -> str:
    from ..report import commit

    label = commit()
    changed = subprocess.run(["git", "status", "--porcelain", "--", "lowkiq"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split("\n")
    changed = [line[3:] for line in changed if line.strip()]
    return f"{label.split('+')[0]}" + (f" + uncommitted {', '.join(changed)}" if changed else "")


# --- one drain ---------------------------------------------------------------------------------------


def drain_once(redis_server: RedisServer, variant: Variant, sizes: Sizes, batch_size: int, *,
               idle: bool, profile_to: str | None = None) -> tuple[Drain, Idle | None]:
    url = redis_server.url
    client = redis.Redis.from_url(url)
    client.flushall()
    load = machine.load1()
    enqueue = float(variant.python(ENQUEUE, url, sizes.jobs, sizes.slice, SHARDS, batch_size))
    worker = blank_worker(SHARDS, batch_size)
    counters = [s.counters_hash for s in worker.keys().shards()]
    queued = sum(client.zcard(s.ids_by_perform_in_zset) for s in worker.keys().shards())
    if queued != sizes.jobs:
        raise RuntimeError(f"{variant.label}: {queued} ids queued, expected {sizes.jobs}: key layouts differ")
    client.config_resetstat()
    env = {**variant.env, "BENCH_EXPECTED": str(sizes.jobs), "BENCH_SHARDS_COUNT": str(SHARDS),
           "BENCH_BATCH_SIZE": str(batch_size)}
    quiet = None
    with LowkiqServer("blank", url, env=env, command=[sys.executable, "-m", "lowkiq.cli"]) as server:
        watched = (server.ps, psutil.Process(redis_server.pid()), psutil.Process())
        spy = SpyRecorder(server.pid, profile_to, 1000 if batch_size > 1 else 200).start() if profile_to else None
        start, end, polls = _watch(client, lambda: _snapshot(client, counters, server, watched), timeout=600,
                                   alive=server.check_alive)
        if spy is not None:
            spy.stop()
        wait_for(lambda: _empty(client, worker), timeout=30, alive=server.check_alive,
                 what="the queue to be empty and every id acknowledged")
        if idle:
            quiet = _idle(client, lambda: _snapshot(client, [], server, watched), variant,
                          IDLE_SMOKE if sizes.smoke else IDLE_FULL)
        server.check_alive()
    first, last = (float(x or 0) for x in client.mget(MARK_FIRST, MARK_LAST))
    drain = Drain(variant.name, batch_size, load, enqueue, last - first, sizes.jobs)
    _costs(drain, start, end, polls, len(counters))
    log(f"{variant.name} batch_size {batch_size}: drain {drain.seconds:.2f} s = {drain.rate:,.0f} jobs/s; "
        f"{drain.round_trips:.3f} round trips and {drain.script_calls:.3f} script calls per batch; Redis CPU "
        f"{drain.redis_cpu_us:.1f} µs/job, server CPU {drain.server_cpu_us:.1f} µs/job (load before {load:.2f})")
    return drain, quiet


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent in user and system mode since boot (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return sum(int(x) for x in fields[1:4]) / os.sysconf("SC_CLK_TCK")


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _snapshot(client: redis.Redis, counters: list[str], server: LowkiqServer,
              watched: tuple[psutil.Process, ...]) -> Snapshot:
    """Redis's counters and the shards' ``processed`` in one transaction; the server's and the others' CPU."""
    busy = _busy_seconds()
    ours = sum(_cpu(p) for p in watched)  # the server, redis-server and this process
    pipe = client.pipeline(transaction=True)
    pipe.info("all")
    for key in counters:
        pipe.hget(key, "processed")
    info, *processed = pipe.execute()
    commands = {k.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
                for k, v in info.items() if k.startswith("cmdstat_")}
    return Snapshot(time.time(), {k: float(info[k]) for k in COUNTED}, commands,
                    sum(int(p or 0) for p in processed), server.cpu_seconds(), busy - ours)


def _watch(client: redis.Redis, snapshot: Callable[[], Snapshot], *, timeout: float,
           alive: Callable[[], None]) -> tuple[Snapshot, Snapshot, int]:
    """Snapshots when the first perform has started and when the last has ended; the polls between them.

    A drain so short that one poll sees both marks (smoke sizes) is counted from ``before``, the
    server's start-up included.
    """
    deadline = time.monotonic() + timeout
    start, polls, started = snapshot(), 0, False
    while True:
        first, last = client.mget(MARK_FIRST, MARK_LAST)
        polls += 1
        if last is not None:
            return start, snapshot(), polls
        if first is not None and not started:
            start, polls, started = snapshot(), 0, True
        if time.monotonic() > deadline:
            raise TimeoutError(f"the queue did not drain in {timeout:.0f} s")
        alive()  # a server that died (or could not start) fails the item now, not after the timeout
        time.sleep(0.01)


def _costs(drain: Drain, a: Snapshot, b: Snapshot, polls: int, shards: int) -> None:
    """Per batch and per job in the window between two snapshots, less what the bench itself sent.

    The bench sent, after the first snapshot's INFO: that transaction's HGETs and EXEC and its reply,
    one MGET per poll, and the second transaction's MULTI (its INFO reads the counters before it counts).
    """
    jobs = b.processed - a.processed
    batches = jobs / drain.batch_size
    if jobs <= 0:
        raise RuntimeError("no job was acknowledged between the two snapshots")

    def delta(key: str) -> float:
        return b.counters[key] - a.counters[key]

    def calls(command: str) -> tuple[int, float]:
        c0, u0 = a.commands.get(command, (0, 0.0))
        c1, u1 = b.commands.get(command, (0, 0.0))
        return c1 - c0, u1 - u0

    scripts = [calls(c) for c in SCRIPT_COMMANDS]
    script_calls = sum(c for c, _ in scripts)
    drain.window_jobs = jobs
    drain.others = (b.others_cpu - a.others_cpu) / max(b.at - a.at, 1e-9)
    drain.round_trips = (delta("total_writes_processed") - polls - 1) / batches
    drain.reads = (delta("total_reads_processed") - polls - 1) / batches
    drain.script_calls = script_calls / batches
    drain.commands = (delta("total_commands_processed") - polls - shards - 2) / batches
    drain.redis_cpu_us = (delta("used_cpu_user") + delta("used_cpu_sys")) / jobs * 1e6
    drain.evalsha_us = sum(u for _, u in scripts) / script_calls if script_calls else 0.0
    drain.server_cpu_us = (b.server_cpu - a.server_cpu) / jobs * 1e6
    drain.bytes_in = delta("total_net_input_bytes") / jobs
    drain.bytes_out = delta("total_net_output_bytes") / jobs


# --- an idle server -----------------------------------------------------------------------------------


def _idle(client: redis.Redis, snapshot: Callable[[], Snapshot], variant: Variant, seconds: float) -> Idle:
    """Every command an idle server sends, from SLOWLOG with a threshold of 0 (top-level commands only)."""
    time.sleep(min(1.0, seconds))  # the last acks and the scheduler settle
    saved = client.config_get("slowlog-*")
    client.config_set("slowlog-max-len", 100_000)
    client.config_set("slowlog-log-slower-than", 0)
    try:
        a = snapshot()
        client.slowlog_reset()
        time.sleep(seconds)
        entries = client.slowlog_get(100_000)
        b = snapshot()
    finally:
        client.config_set("slowlog-log-slower-than", saved["slowlog-log-slower-than"])
        client.config_set("slowlog-max-len", saved["slowlog-max-len"])
    elapsed = b.at - a.at
    mine = {"info", "multi", "exec", "slowlog", "config", "mget"}
    seen: dict[str, list[int]] = {}
    for entry in entries:
        if entry.get("client_address") == b"?:0":
            continue  # run by a script: its time is the script's
        words = entry["command"].decode(errors="replace").split(" ", 2)  # redis-py joins the words with spaces
        name = words[0].lower()
        if name in mine:
            continue
        if name in SCRIPT_COMMANDS and len(words) > 1:
            name = variant.scripts.get(words[1], words[1][:8])
        seen.setdefault(name, []).append(int(entry["duration"]))
    window = max(elapsed, 1e-9)
    commands = {name: (len(d) / window, sum(d) / len(d)) for name, d in sorted(seen.items())}
    # Less the bench's own: the first snapshot's reply, SLOWLOG RESET and SLOWLOG GET.
    writes = b.counters["total_writes_processed"] - a.counters["total_writes_processed"] - 3
    cpu = b.counters["used_cpu_user"] + b.counters["used_cpu_sys"] - a.counters["used_cpu_user"] - a.counters["used_cpu_sys"]
    return Idle(elapsed, writes / window, cpu / window * 1e6, (b.server_cpu - a.server_cpu) / window * 1e6, commands)


# --- the table ---------------------------------------------------------------------------------------


def _report(result: ItemResult, sizes: Sizes, drains: list[Drain], idle: dict[str, Idle],
            previous: Variant, current: Variant) -> None:
    def pick(name: str, batch_size: int) -> list[Drain]:
        return [d for d in drains if d.variant == name and d.batch_size == batch_size]

    def med(runs: list[Drain], attr: str) -> float:
        return median([getattr(d, attr) for d in runs])

    result.row("previous code", f"commit {previous.label}")
    result.row("current code", f"commit {current.label}")
    for batch_size in BATCH_SIZES:
        old, new = pick("previous", batch_size), pick("current", batch_size)
        tag = f"batch_size {batch_size}"
        result.row(f"{tag}, previous: drain, s", spread([d.seconds for d in old]))
        result.row(f"{tag}, current: drain, s", spread([d.seconds for d in new]))
        result.row(f"{tag}: drain, jobs/s, previous → current",
                   f"{sizes.jobs / med(old, 'seconds'):,.0f} → {sizes.jobs / med(new, 'seconds'):,.0f}")
        ratio = med(old, "seconds") / med(new, "seconds")
        result.row(f"{tag}: throughput, current / previous", f"{ratio:.2f}×", ">= 0.90×",
                   None if sizes.smoke else ratio >= 0.90)
        rt_old, rt_new = med(old, "round_trips"), med(new, "round_trips")
        result.row(f"{tag}: Redis round trips per batch, previous → current", f"{rt_old:.3f} → {rt_new:.3f}",
                   "the same (± 0.01)", None if sizes.smoke else abs(rt_new - rt_old) <= 0.01)
        for label, attr, fmt in (("script calls per batch", "script_calls", "{:.3f}"),
                                 ("Redis commands per batch, inside scripts included", "commands", "{:.2f}"),
                                 ("Redis CPU per job, µs", "redis_cpu_us", "{:.1f}"),
                                 ("EVALSHA (ack_and_take), µs per call", "evalsha_us", "{:.1f}"),
                                 ("server process CPU per job, µs", "server_cpu_us", "{:.1f}"),
                                 ("bytes to Redis per job", "bytes_in", "{:.0f}")):
            a, b = med(old, attr), med(new, attr)
            change = f" ({b / a:.2f}×)" if a and attr != "script_calls" else ""
            result.row(f"{tag}: {label}, previous → current", f"{fmt.format(a)} → {fmt.format(b)}{change}")
    for name in ("previous", "current"):
        quiet = idle.get(name)
        if quiet is not None:
            result.row(f"idle server, {name}: round trips/s; Redis CPU, server CPU, µs/s",
                       f"{quiet.round_trips:.1f}; {quiet.redis_cpu_us:,.0f}, {quiet.server_cpu_us:,.0f}")
    _notes(result, drains, idle, previous, current)


def _notes(result: ItemResult, drains: list[Drain], idle: dict[str, Idle], previous: Variant,
           current: Variant) -> None:
    lines = ["| script | code | where | calls | µs per call | Redis µs per job or per second |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for batch_size in BATCH_SIZES:
        for name in ("previous", "current"):
            runs = [d for d in drains if d.variant == name and d.batch_size == batch_size]
            calls, us = median([d.script_calls for d in runs]), median([d.evalsha_us for d in runs])
            lines.append(f"| ack_and_take | {name} | drain, batch_size {batch_size} | {calls:.3f} per batch | "
                         f"{us:.1f} | {calls * us / batch_size:.1f} per job |")
    for name in ("previous", "current"):
        quiet = idle.get(name)
        for command, (rate, us) in (quiet.commands.items() if quiet else ()):
            lines.append(f"| {command} | {name} | idle | {rate:.1f} per second | {us:.1f} | {rate * us:.0f} per second |")
    result.note("Redis time per script (`INFO commandstats` during the drains: medians; every EVALSHA of a drain "
                "is counted as ack_and_take, the keeper's few calls included), and every top-level command an "
                "idle server sends (SLOWLOG with a threshold of 0 for "
                f"{next(iter(idle.values())).seconds if idle else 0:.0f} s after a batch_size 1 drain, with "
                "nothing queued; scripts named by their SHA):\n\n" + "\n".join(lines))
    lines = ["| run | batch_size | code | 1-minute load before | enqueue, s | drain, s | jobs/s | round trips/batch "
             "| Redis CPU µs/job | EVALSHA µs/call | server CPU µs/job |",
             "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    per_run = len(BATCH_SIZES) * 2
    for n, d in enumerate(drains):
        lines.append(f"| {n // per_run + 1} | {d.batch_size} | {d.variant} | {d.load:.2f} | {d.enqueue:.2f} | "
                     f"{d.seconds:.2f} | {d.rate:,.0f} | {d.round_trips:.3f} | {d.redis_cpu_us:.1f} | "
                     f"{d.evalsha_us:.1f} | {d.server_cpu_us:.1f} |")
    result.note("Every drain in the order it ran (the load is read just before its enqueue):\n\n" + "\n".join(lines))
    result.note(
        "How it is counted, between a snapshot taken once the first perform has started and one once the last "
        "has ended. Round trips: Redis's `total_writes_processed` (one write per reply flush: one per request "
        "or pipeline), less the bench's own polls, divided by the batches acknowledged in between (`processed` "
        "counters / batch_size). Script calls: EVALSHA and EVAL calls (`INFO commandstats`). Commands: "
        "`total_commands_processed`, which counts the commands the scripts run too. Redis CPU: "
        "`used_cpu_user + used_cpu_sys`. Server CPU: the `lowkiq` process's user + system time (psutil). "
        "Idle Redis CPU includes Redis's own timer (`hz` 10), the same for both. "
        f"Previous: commit {previous.label}; current: commit {current.label}.")
