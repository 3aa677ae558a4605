"""Two versions of lowkiq on one benchmark, in one run: ``python -m bench.versus --before REV``.

    python -m bench.versus --before 07b3bc3 [--after HEAD] [--pairs 6] [--workload fairness-plain]
    python -m bench.versus --before 'cdb451e^' --after HEAD --workload server-blank
    python -m bench.versus --before HEAD --before-env LOWKIQ_SPLITTER=default --workload server-blank

The code of ``--before`` (and of ``--after``, when given; else the working tree through the
editable install) is checked out into a temporary ``git worktree`` and imported with
``PYTHONPATH`` pointing there; which ``lowkiq/__init__.py`` each side imports is checked and
printed. ``--before-env`` and ``--after-env`` (KEY=VALUE, repeatable) add to one side's environment, and
so to its server's: one code in two configurations (pinned threads against the pool, above). The current
``bench`` package is copied into a temporary folder, the working directory
of every run, so that both sides run the same benchmark code (``bench.common.hold`` takes a lease
with ``queue.acquire`` where ``lowkiq.server.holdings`` does not exist yet).

Both sides share one private redis-server and run in pairs: A then B, then B then A, and so on,
each run in a fresh process, so that a machine getting busier or calmer during the run (a shared
machine) favours neither. The table gives every pair with the 1-minute load before it, the median
of each side and the median of the pairwise ratios (after / before).

Workloads:

- ``fairness-plain``: ``bench.fairness``'s Lowkiq shape without groups (``--plain-only``): push
  ``--jobs`` (20,000) jobs into 4 shards, then drain them with ``ack_and_take``, batch 10, one
  thread, at the store level. ``--rounds`` (3) such rounds per run; a run reports their median.
- ``server-blank``: a real server, ``lowkiq -r bench/apps/blank.py`` (5 threads,
  5 shards, batch_size 1, lag scheduler), drains ``--jobs`` (100,000) blank jobs that the side
  enqueued with its own code; the drain is timed from the first perform's start to the last one's
  end (the app's marks in Redis). The server is the side's ``lowkiq.cli:main`` (the console script's entry
  point) run by this interpreter with the side's ``PYTHONPATH``. A side with integer microsecond scores
  enqueues into shards already migrated, as its servers leave them (``bench.common.as_served``).
- ``enqueue-one``: the producer of ``bench.async_io``: ``--jobs`` (5,000) ``perform_async`` calls of one job
  each, ids taken in turn from 1,000, into a worker of 500 shards (a call merges into an id still queued
  once every id is). Calls/s, this process's CPU per call (Python and its system calls), Redis CPU per call.
  ``aenqueue-one``: the same calls awaited one by one with ``aperform_async`` on an event loop.
- ``enqueue-spread``: ``--jobs`` (100,000) jobs in ``perform_async`` calls of 10,000 into a worker of 1,000
  shards (about 10 ids per push script), and the same into 5 shards: jobs/s, Redis CPU and this process's CPU
  per job, and the 1,000 shards' jobs/s over the 5 shards' (issue 39's "enqueue into 1,000 shards").
- ``enqueue-shards``: ``--jobs`` (100,000) distinct ids enqueued in calls of 10,000 into 5, 100 and 1,000
  shards (``--rounds`` each, their median): jobs/s, Redis CPU per job, memory per queued job (INFO
  used_memory delta, and the perform_in zsets alone by MEMORY USAGE). A side with integer microsecond
  scores enqueues into shards already migrated (their writers write microseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ROOT

WORKLOADS = ("fairness-plain", "server-blank", "enqueue-one", "aenqueue-one", "enqueue-spread", "enqueue-shards")
DEFAULT_JOBS = {"fairness-plain": 20_000, "server-blank": 100_000, "enqueue-one": 5_000, "aenqueue-one": 5_000,
                "enqueue-spread": 100_000, "enqueue-shards": 100_000}
ENQUEUE_SHARDS = (5, 100, 1000)
# metric key, column title, format; the first is the one the ratios headline
METRICS = {
    "fairness-plain": [("drain_per_s", "drain jobs/s", "{:,.0f}"), ("push_per_s", "push jobs/s", "{:,.0f}"),
                       ("usec_per_job", "Redis CPU per job (EVALSHA µs)", "{:.1f}"),
                       ("push_usec_per_job", "of which push, µs", "{:.1f}"),
                       ("drain_usec_per_job", "of which drain, µs", "{:.1f}"),
                       ("commands_per_batch", "Redis commands per batch of the drain", "{:.2f}"),
                       ("scripts_per_batch", "scripts per batch", "{:.2f}")],
    "server-blank": [("drain_per_s", "drain jobs/s", "{:,.0f}"), ("enqueue_per_s", "enqueue jobs/s", "{:,.0f}"),
                     ("usec_per_job", "Redis CPU per job (EVALSHA µs)", "{:.1f}"),
                     ("server_cpu_us", "server CPU per job, µs", "{:.1f}"),
                     ("commands_per_job", "Redis commands per job", "{:.2f}")],
    "enqueue-one": [("calls_per_s", "perform_async calls/s", "{:,.0f}"),
                    ("producer_cpu_us", "producer CPU per call, µs", "{:.1f}"),
                    ("usec_per_call", "Redis CPU per call (EVALSHA µs)", "{:.1f}"),
                    ("scripts_per_call", "push scripts per call (one round trip)", "{:.2f}")],
    "aenqueue-one": [("calls_per_s", "aperform_async calls/s", "{:,.0f}"),
                     ("producer_cpu_us", "producer CPU per call, µs", "{:.1f}"),
                     ("usec_per_call", "Redis CPU per call (EVALSHA µs)", "{:.1f}"),
                     ("scripts_per_call", "push scripts per call (one round trip)", "{:.2f}")],
    "enqueue-spread": [("jobs_per_s", "jobs/s into 1,000 shards", "{:,.0f}"),
                       ("usec_per_job", "Redis CPU per job, 1,000 shards (µs)", "{:.2f}"),
                       ("producer_cpu_us", "producer CPU per job, 1,000 shards (µs)", "{:.2f}"),
                       ("few_jobs_per_s", "jobs/s into 5 shards", "{:,.0f}"),
                       ("few_usec_per_job", "Redis CPU per job, 5 shards (µs)", "{:.2f}"),
                       ("spread_ratio", "1,000 shards' jobs/s over 5 shards'", "{:.3f}")],
    "enqueue-shards": [
        *[(f"enqueue_{n}_per_s", f"enqueue, {n:,} shards, jobs/s", "{:,.0f}") for n in ENQUEUE_SHARDS],
        *[(f"usec_{n}", f"Redis CPU per job, {n:,} shards (EVALSHA µs)", "{:.1f}") for n in ENQUEUE_SHARDS],
        *[(f"bytes_{n}", f"used_memory per queued job, {n:,} shards", "{:.1f}") for n in ENQUEUE_SHARDS],
        *[(f"zset_bytes_{n}", f"perform_in zsets per job, {n:,} shards (MEMORY USAGE)", "{:.1f}")
          for n in ENQUEUE_SHARDS]],
}
WHICH = "import lowkiq; print(lowkiq.__file__)"


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# --- the parent: trees, pairs, the table ---------------------------------------------------------------


@dataclass
class Side:
    name: str        # "before" or "after"
    rev: str         # what was asked for, e.g. 07b3bc3 or HEAD; "" for the working tree
    commit: str      # the commit it resolved to ("" for the working tree)
    root: str        # the tree whose lowkiq/ is imported
    pythonpath: str  # "" for the working tree's editable install
    extra: dict[str, str] = field(default_factory=dict)  # more environment, for its runs and its server

    @property
    def label(self) -> str:
        code = f"{self.rev} ({self.commit})" if self.rev else "working tree"
        return code + "".join(f" {k}={v}" for k, v in self.extra.items())

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "LOWKIQ_REDIS_URL")}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return {**env, **self.extra}

    def run(self, stage: str, args: list[str], timeout: float) -> str:
        done = subprocess.run([sys.executable, *args], cwd=stage, env=self.env(), capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} ({self.label}) failed:\n{done.stderr[-3000:]}")
        return done.stdout.strip()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def worktree(rev: str) -> Iterator[str]:
    """A detached worktree of ``rev`` in /tmp, removed afterwards whatever happens."""
    folder = tempfile.mkdtemp(prefix="lowkiq-versus-")
    try:
        git("worktree", "add", "--detach", folder, rev)
        yield folder
    finally:
        removed = subprocess.run(["git", "worktree", "remove", "--force", folder], cwd=ROOT, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        if removed.returncode != 0:
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


@contextmanager
def staged_bench() -> Iterator[str]:
    """A folder holding a copy of the current ``bench`` package: the runs' working directory."""
    stage = tempfile.mkdtemp(prefix="lowkiq-versus-bench-")
    try:
        shutil.copytree(Path(ROOT) / "bench", Path(stage) / "bench",
                        ignore=shutil.ignore_patterns("__pycache__", "results", "out", "*.md"))
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def check_import(side: Side, stage: str) -> str:
    """The lowkiq/__init__.py the side imports from the runs' directory; it must be its own tree's."""
    found = side.run(stage, ["-c", WHICH], timeout=60)
    if not os.path.realpath(found).startswith(os.path.realpath(side.root) + os.sep):
        raise RuntimeError(f"{side.name} imports lowkiq from {found}, not from {side.root}")
    return found


def fmt_ratio(value: float) -> str:
    return f"{value:.3f}×"


def table(workload: str, sides: tuple[Side, Side], runs: list[dict[str, Any]], pairs: int) -> str:
    before, after = sides
    metrics = METRICS[workload]
    lines = [f"| pair | order | load before | {' | '.join(f'{title}, before → after' for _, title, _ in metrics)} "
             f"| {metrics[0][1]}, after / before |",
             "| ---: | --- | ---: |" + " --- |" * len(metrics) + " ---: |"]
    ratios: dict[str, list[float]] = {key: [] for key, _, _ in metrics}
    for n in range(pairs):
        pair = [r for r in runs if r["pair"] == n]
        a = next(r for r in pair if r["side"] == "before")
        b = next(r for r in pair if r["side"] == "after")
        for key, _, _ in metrics:
            if a[key]:
                ratios[key].append(b[key] / a[key])
        order = " ".join(r["side"] for r in pair)
        cells = " | ".join(f"{f.format(a[key])} → {f.format(b[key])}" for key, _, f in metrics)
        lines.append(f"| {n + 1} | {order} | {max(r['load'] for r in pair):.2f} | {cells} "
                     f"| {fmt_ratio(ratios[metrics[0][0]][-1])} |")
    lines += ["", f"| {workload}, {pairs} pairs | before: {before.label} | after: {after.label} "
                  "| median of the pairwise ratios, after / before (lowest to highest) |",
              "| --- | ---: | ---: | ---: |"]
    for key, title, f in metrics:
        med_a = statistics.median(r[key] for r in runs if r["side"] == "before")
        med_b = statistics.median(r[key] for r in runs if r["side"] == "after")
        rs = ratios[key]
        spread = f"{fmt_ratio(statistics.median(rs))} ({fmt_ratio(min(rs))} to {fmt_ratio(max(rs))})" if rs else ""
        lines.append(f"| {title} (median) | {f.format(med_a)} | {f.format(med_b)} | {spread} |")
    loads = [r["load"] for r in runs]
    lines += ["", f"1-minute load before each run: median {statistics.median(loads):.2f}, "
                  f"{min(loads):.2f} to {max(loads):.2f}; {os.cpu_count()} CPUs."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="the older code: a commit or any git revision (e.g. 'cdb451e^')")
    parser.add_argument("--after", default="",
                        help="the newer code: a git revision (default: the working tree, as installed)")
    parser.add_argument("--before-env", action="append", default=[], metavar="KEY=VALUE",
                        help="more environment for the before side (its server's too); repeatable")
    parser.add_argument("--after-env", action="append", default=[], metavar="KEY=VALUE",
                        help="more environment for the after side (its server's too); repeatable")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--workload", choices=WORKLOADS, default="fairness-plain")
    parser.add_argument("--jobs", type=int, help="jobs per run (20,000 for fairness-plain, 100,000 for server-blank)")
    parser.add_argument("--rounds", type=int, default=3, help="fairness-plain: rounds per run, their median is the run's")
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    options = parser.parse_args()
    jobs = options.jobs or DEFAULT_JOBS[options.child or options.workload]
    if options.child:
        print(json.dumps(CHILDREN[options.child](options.redis_url, jobs, options.rounds)))
        return
    if not options.before:
        parser.error("--before REV is required")

    from .redis_server import RedisServer

    with ExitStack() as stack:
        stage = stack.enter_context(staged_bench())
        before = Side("before", options.before, git("rev-parse", "--short", options.before),
                      stack.enter_context(worktree(options.before)), "")
        before.pythonpath = before.root
        if options.after:
            after = Side("after", options.after, git("rev-parse", "--short", options.after),
                         stack.enter_context(worktree(options.after)), "")
            after.pythonpath = after.root
        else:
            after = Side("after", "", "", ROOT, "")
        for side, given in ((before, options.before_env), (after, options.after_env)):
            side.extra = dict(pair.split("=", 1) for pair in given)
        for side in (before, after):
            print(f"{side.name}: {side.label} imports {check_import(side, stage)}", flush=True)
        redis_server = stack.enter_context(RedisServer())
        runs: list[dict[str, Any]] = []
        timeout = 600 if options.workload == "server-blank" else 300
        for n in range(options.pairs):
            order = (before, after) if n % 2 == 0 else (after, before)
            for side in order:
                load = load1()
                out = side.run(stage, ["-m", "bench.versus", "--child", options.workload, "--redis-url",
                                       redis_server.url, "--jobs", str(jobs), "--rounds", str(options.rounds)],
                               timeout=timeout)
                result = json.loads(out.splitlines()[-1])
                if not os.path.realpath(result["lowkiq"]).startswith(os.path.realpath(side.root) + os.sep):
                    raise RuntimeError(f"{side.name} ran lowkiq from {result['lowkiq']}, not from {side.root}")
                result.update(pair=n, side=side.name, load=load)
                runs.append(result)
                print(f"  {time.strftime('%H:%M:%S')} pair {n + 1}/{options.pairs} {side.name}: load {load:.2f}, "
                      f"{METRICS[options.workload][0][1]} {result[METRICS[options.workload][0][0]]:,.0f}", flush=True)
        print()
        print(table(options.workload, (before, after), runs, options.pairs))


# --- the children: one run of a workload, under the side's own lowkiq ----------------------------------


def fairness_plain(url: str, jobs: int, rounds: int) -> dict[str, Any]:
    import redis

    import lowkiq

    from . import fairness

    lowkiq.configure(redis_url=url, workers=[fairness.Fair])
    client = redis.Redis.from_url(url)
    results = [fairness.one_run(client, jobs, 0) for _ in range(rounds)]
    med = {key: statistics.median(r[key] for r in results) for key in results[0]}
    return {**med, "lowkiq": lowkiq.__file__}


SHARDS, SLICE = 5, 10_000
# The ``lowkiq`` console script's entry point, lowkiq.cli:main in every tree, run by the side's interpreter
# (``python -m lowkiq.cli`` needs a lowkiq/cli/__main__.py that some trees lack).
LOWKIQ = "import sys; from lowkiq.cli import main; sys.argv[0] = 'lowkiq'; sys.exit(main())"


def server_blank(url: str, jobs: int, rounds: int) -> dict[str, Any]:
    import redis

    import lowkiq

    from .common import LowkiqServer, as_served, wait_drained

    client = redis.Redis.from_url(url)
    client.flushall()
    worker = type("BlankWorker", (lowkiq.Worker,), {"shards_count": SHARDS, "batch_size": 1,
                                                    "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    as_served(runtime, worker)
    started = time.perf_counter()
    for start in range(0, jobs, SLICE):
        worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + SLICE))])
    enqueue = time.perf_counter() - started
    runtime.close()
    client.config_resetstat()
    env = {"BENCH_EXPECTED": str(jobs), "BENCH_SHARDS_COUNT": str(SHARDS), "BENCH_BATCH_SIZE": "1"}
    with LowkiqServer("blank", url, env=env, command=[sys.executable, "-c", LOWKIQ]) as server:
        drain = wait_drained(client, timeout=300, alive=server.check_alive, cpu=server.cpu_seconds)
        # Read while the server runs: its start (leases, membership) is counted, its exit is not.
        commands = int(client.info("stats")["total_commands_processed"])
        evalsha = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})
    return {"drain_per_s": jobs / drain.seconds, "enqueue_per_s": jobs / enqueue,
            "usec_per_job": int(evalsha["usec"]) / jobs, "server_cpu_us": drain.server_cpu / jobs * 1e6,
            "commands_per_job": commands / jobs,
            "lowkiq": lowkiq.__file__}


def _producer(url: str, shards: int, name: str) -> tuple[Any, Any, Any]:
    """(a worker of ``shards`` shards, its runtime, a plain client) on a flushed Redis, the worker registered."""
    import redis

    import lowkiq

    client = redis.Redis.from_url(url)
    client.flushall()
    worker = type(name, (lowkiq.Worker,), {"shards_count": shards, "batch_size": 1,
                                           "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    worker.perform_async([{"id": "first", "payload": ""}])  # registers the worker: once per process
    client.config_resetstat()
    return worker, runtime, client


def enqueue_one(url: str, jobs: int, rounds: int, awaited: bool = False) -> dict[str, Any]:
    import asyncio

    import lowkiq

    worker, runtime, client = _producer(url, 500, "AsyncIoWorker")
    calls = [[{"id": f"id{n % 1000}", "payload": {"v": n, "w": 50.0}, "score": n}] for n in range(jobs)]

    async def send_all() -> None:
        for call in calls:
            await worker.aperform_async(call)

    started, cpu = time.perf_counter(), time.process_time()
    if awaited:
        asyncio.run(send_all())
    else:
        for call in calls:
            worker.perform_async(call)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    runtime.close()
    evalsha = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0, "calls": 0})
    return {"calls_per_s": jobs / wall, "producer_cpu_us": cpu / jobs * 1e6,
            "usec_per_call": int(evalsha["usec"]) / jobs, "scripts_per_call": int(evalsha["calls"]) / jobs,
            "lowkiq": lowkiq.__file__}


def enqueue_spread(url: str, jobs: int, rounds: int) -> dict[str, Any]:
    import lowkiq

    out: dict[str, Any] = {}
    for shards, prefix in ((1_000, ""), (5, "few_")):
        worker, runtime, client = _producer(url, shards, f"Spread{shards}Worker")
        started, cpu = time.perf_counter(), time.process_time()
        for start in range(0, jobs, SLICE):
            worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + SLICE))])
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        runtime.close()
        evalsha = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})
        out.update({f"{prefix}jobs_per_s": jobs / wall, f"{prefix}usec_per_job": int(evalsha["usec"]) / jobs,
                    f"{prefix}producer_cpu_us": cpu / jobs * 1e6})
    out["spread_ratio"] = out["jobs_per_s"] / out["few_jobs_per_s"]
    return {**out, "lowkiq": lowkiq.__file__}


def enqueue_shards(url: str, jobs: int, rounds: int) -> dict[str, Any]:
    """``jobs`` distinct ids enqueued in calls of 10,000 into 5, 100 and 1,000 shards: jobs/s, Redis CPU per job,
    and memory per queued job (INFO used_memory delta; and the perform_in zsets alone, MEMORY USAGE). A side
    that has integer microsecond scores enqueues into migrated shards, as its servers leave them."""
    import importlib.util

    import redis

    import lowkiq

    from .enqueue_cost import enqueue_into

    micro = importlib.util.find_spec("lowkiq.store.score_units") is not None  # the older side: seconds
    client = redis.Redis.from_url(url)
    out: dict[str, Any] = {"lowkiq": lowkiq.__file__}
    for shards in ENQUEUE_SHARDS:
        results = [enqueue_into(url, client, f"Shards{shards}", shards, jobs, SLICE, micro) for _ in range(rounds)]
        out[f"enqueue_{shards}_per_s"] = statistics.median(r["rate"] for r in results)
        out[f"usec_{shards}"] = statistics.median(r["evalsha"] for r in results)
        out[f"bytes_{shards}"] = statistics.median(r["bytes"] for r in results)
        out[f"zset_bytes_{shards}"] = statistics.median(r["zset_bytes"] for r in results)
    return out


CHILDREN: dict[str, Callable[[str, int, int], dict[str, Any]]] = {
    "fairness-plain": fairness_plain, "server-blank": server_blank, "enqueue-one": enqueue_one,
    "aenqueue-one": lambda url, jobs, rounds: enqueue_one(url, jobs, rounds, awaited=True),
    "enqueue-spread": enqueue_spread, "enqueue-shards": enqueue_shards}


if __name__ == "__main__":
    main()
