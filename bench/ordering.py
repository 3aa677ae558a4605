"""Per-id order under hot ids: ``python -m bench.ordering [--versions N] [--ids K] [--rounds R] [--only NAMES] [--smoke]``.

``--versions`` (10,000) versions over ``--ids`` (100) ids, each version's id drawn Zipf-like (id of rank r
with weight 1/r: the hottest gets about a fifth of the versions), each with 0 to 2 ms of work (uniform; seeded,
the same list for everyone). A producer process sends them one by one, in order, while the worker runs (it
first sends one job and waits for it to be applied, so that no worker's start-up is counted). A job sleeps
its work (``asyncio.sleep`` in the asyncio peers) and then applies its version with one script
(bench/peers/marks.py): the id's state becomes that version, last writer wins, as a job writing an id's
state would, and a version older than the one the id holds counts as applied out of order.

Reported per contender: versions applied out of order; ids left at an older version than the newest sent
for them; seconds from the first version sent to the last one applied. lowkiq runs once, as it runs by
default (5 threads, 5 shards, batch_size 1; a perform gets every version of its id queued so far, does the
newest one's work once and records each, in order: bench/apps/ordering.py). Each peer runs twice: as a
user would set it up to keep per-id order (one job at a time: one worker, concurrency 1; none of them
offers a lock per id that keeps order, see docs/benchmarks.md) and at concurrency 5, as it runs by
default in item 4. lowkiq must show 0 and 0. ``--smoke`` runs everything at 200 versions over 10 ids.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from . import ROOT
from .common import LowkiqServer, log
from .machine import load1
from .peers import arq_env
from .peers.marks import APPLIED, LAST, OUT_OF_ORDER, READY, STATE
from .peers.runner import BIN, _stop
from .redis_server import RedisServer

SEED = 7


def versions(total: int, ids: int, seed: int = SEED) -> list[tuple[str, int, float]]:
    """(id, version, work in ms), in sending order; each id's versions count up from 1."""
    rng = random.Random(seed)
    names = [f"id{k}" for k in range(ids)]
    drawn = rng.choices(names, weights=[1 / (rank + 1) for rank in range(ids)], k=total)
    held: dict[str, int] = {}
    out = []
    for name in drawn:
        held[name] = held.get(name, 0) + 1
        out.append((name, held[name], round(rng.uniform(0.0, 2.0), 3)))
    return out


@dataclass(frozen=True)
class Contender:
    name: str                                  # --only picks by it
    setup: str                                 # the table's second column
    module: str                                # whose produce_versions(path) sends the versions
    worker: Callable[[str, str], list[str]]    # the worker's command, given the interpreter and the Redis URL
    python: Callable[[], str] = lambda: sys.executable
    concurrency: int = 5                       # BENCH_CONCURRENCY for the asyncio peers
    app: str = "ordering"                      # lowkiq's: bench/apps/<app>.py (bench.async_io runs its own)
    threads: int = 5                           # lowkiq's threads_per_node


def _module(module: str) -> Callable[[str, str], list[str]]:
    return lambda python, _: [python, "-c", f"import {module} as app; app.work()"]


def _rq(*options: str) -> Callable[[str, str], list[str]]:
    return lambda _, url: [str(BIN / "rq"), *options, "--url", url, "bench"]


def _dramatiq(threads: int) -> Callable[[str, str], list[str]]:
    return lambda _, __: [str(BIN / "dramatiq"), "bench.peers.dramatiq_app", "--processes", "1", "--threads", str(threads)]


def _taskiq(tasks: int) -> Callable[[str, str], list[str]]:
    return lambda _, __: [str(BIN / "taskiq"), "worker", "bench.peers.taskiq_app:broker", "--workers", "1",
                          "--max-async-tasks", str(tasks), "--log-level", "WARNING"]


ONE, FIVE = "one job at a time (for order)", "concurrency 5"
CONTENDERS = (
    Contender("lowkiq", "5 threads, 5 shards, batch_size 1 (default)", "bench.ordering", lambda _, __: []),
    Contender("rq", f"{ONE}: one SimpleWorker", "bench.peers.rq_jobs",
              _rq("worker", "--worker-class", "rq.worker.SimpleWorker", "--logging_level", "WARNING", "--quiet")),
    Contender("rq", f"{FIVE}: worker-pool of 5 SimpleWorkers", "bench.peers.rq_jobs",
              _rq("worker-pool", "--num-workers", "5", "--worker-class", "rq.worker.SimpleWorker", "--logging-level",
                  "WARNING", "--quiet")),
    Contender("dramatiq", f"{ONE}: 1 process × 1 thread", "bench.peers.dramatiq_app", _dramatiq(1)),
    Contender("dramatiq", f"{FIVE}: 1 process × 5 threads", "bench.peers.dramatiq_app", _dramatiq(5)),
    Contender("saq", f"{ONE}: concurrency 1", "bench.peers.saq_app",
              lambda _, __: [str(BIN / "saq"), "bench.peers.saq_app.settings", "--workers", "1"], concurrency=1),
    Contender("saq", f"{FIVE}", "bench.peers.saq_app",
              lambda _, __: [str(BIN / "saq"), "bench.peers.saq_app.settings", "--workers", "1"]),
    Contender("streaq", f"{ONE}: concurrency 1", "bench.peers.streaq_app", _module("bench.peers.streaq_app"),
              concurrency=1),
    Contender("streaq", f"{FIVE}", "bench.peers.streaq_app", _module("bench.peers.streaq_app")),
    Contender("arq", f"{ONE}: max_jobs 1", "bench.peers.arq_app", _module("bench.peers.arq_app"), arq_env.python,
              concurrency=1),
    Contender("arq", f"{FIVE}: max_jobs 5", "bench.peers.arq_app", _module("bench.peers.arq_app"), arq_env.python),
    Contender("taskiq", f"{ONE}: --max-async-tasks 1", "bench.peers.taskiq_app", _taskiq(1), concurrency=1),
    Contender("taskiq", f"{FIVE}: --max-async-tasks 5", "bench.peers.taskiq_app", _taskiq(5)),
)


@dataclass
class Outcome:
    contender: Contender
    load: float
    out_of_order: int
    left_older: int
    seconds: float        # first version sent to the last one applied
    sending: float        # how long the producer took to send them


def produce_versions(path: str) -> None:
    """lowkiq's producer: one ``perform_async`` per version, score = version (run in a subprocess, like the peers')."""
    import lowkiq

    from .peers.marks import send_versions

    worker = type("OrderingWorker", (lowkiq.Worker,), {"shards_count": 5, "batch_size": 1, "__module__": __name__,
                                                       "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=os.environ["BENCH_REDIS_URL"])
    try:
        send_versions(lambda job_id, version, work: worker.perform_async(
            [{"id": job_id, "payload": {"v": version, "w": work}, "score": version}]), path)
    finally:
        runtime.close()


def _count(client: redis.Redis, sent: list[tuple[str, int, float]]) -> tuple[int, int]:
    newest: dict[str, int] = {}
    for job_id, version, _ in sent:
        newest[job_id] = version
    state = {k.decode(): int(v) for k, v in client.hgetall(STATE).items()}
    left = sum(1 for job_id, version in newest.items() if state.get(job_id, 0) < version)
    return int(client.get(OUT_OF_ORDER) or 0), left


def run_one(contender: Contender, url: str, client: redis.Redis, sent: list[tuple[str, int, float]],
            path: str) -> Outcome:
    client.flushall()
    load = load1()
    env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_CONCURRENCY": str(contender.concurrency)}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    python = contender.python()
    timeout = 120 + len(sent) * 0.02
    with tempfile.TemporaryFile() as stderr, _worker(contender, python, url, env, stderr) as alive:
        producer = subprocess.Popen([python, "-c", f"import {contender.module} as app; app.produce_versions({path!r})"],
                                    env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = producer.communicate(timeout=timeout)
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.wait()
        if producer.returncode != 0:
            raise RuntimeError(f"{contender.name}'s producer exited with {producer.returncode}:\n{err[-3000:]}")
        started, sending = (float(x) for x in out.strip().splitlines()[-1].split())
        deadline = time.monotonic() + timeout
        while int(client.get(APPLIED) or 0) < len(sent) + 1:  # and the READY job
            alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{contender.name} ({contender.setup}) applied {int(client.get(APPLIED) or 0):,} "
                                   f"of {len(sent) + 1:,} versions in {timeout:.0f} s")
            time.sleep(0.05)
    out_of_order, left = _count(client, sent)
    outcome = Outcome(contender, load, out_of_order, left, float(client.get(LAST) or 0) - started, sending)
    log(f"{contender.name} ({contender.setup}): {out_of_order:,} out of order, {left} ids left older, "
        f"{outcome.seconds:.2f} s (sent in {sending:.2f} s; load {load:.2f})")
    return outcome


class _worker:
    """The contender's worker (a lowkiq server, or the peer's command in its own process group) for a ``with``."""

    def __init__(self, contender: Contender, python: str, url: str, env: dict[str, str], stderr: object) -> None:
        self.contender, self.python, self.url, self.env, self.stderr = contender, python, url, env, stderr
        self.server: LowkiqServer | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Callable[[], None]:
        if self.contender.name == "lowkiq":
            self.server = LowkiqServer(self.contender.app, self.url, threads=self.contender.threads,
                                       env={"BENCH_REDIS_URL": self.url,
                                            "BENCH_CONCURRENCY": str(self.contender.concurrency)}).__enter__()
            return self.server.check_alive
        self.process = subprocess.Popen(self.contender.worker(self.python, self.url), env=self.env, cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=self.stderr,  # type: ignore[arg-type]
                                        start_new_session=True)
        return self.alive

    def alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            self.stderr.seek(0)  # type: ignore[attr-defined]
            tail = self.stderr.read().decode(errors="replace")[-3000:]  # type: ignore[attr-defined]
            raise RuntimeError(f"{self.contender.name}'s worker exited with {self.process.returncode}:\n{tail}")

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.__exit__(*exc)
        if self.process is not None:
            _stop(self.process)


def _cell(values: list[float], fmt: str) -> str:
    return ", ".join(fmt.format(v) for v in values)


def table(outcomes: dict[Contender, list[Outcome]], total: int, ids: int, rounds: int) -> str:
    lines = [f"{total:,} versions over {ids} ids (Zipf-like), 0 to 2 ms of work each, sent one by one while the worker "
             f"runs; {rounds} round(s), the contenders' order reversed every other round; every round's counts, "
             "the median of the times",
             "",
             "| queue | set up | versions applied out of order | ids left at an older version | seconds, first sent "
             "to last applied | sending took, s | load before |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for contender, runs in outcomes.items():
        loads = [o.load for o in runs]
        load = f"{loads[0]:.2f}" if len(loads) == 1 else f"{min(loads):.2f} to {max(loads):.2f}"
        lines.append(f"| {contender.name} | {contender.setup} | {_cell([o.out_of_order for o in runs], '{:,}')} | "
                     f"{_cell([o.left_older for o in runs], '{}')} | "
                     f"{statistics.median(o.seconds for o in runs):.2f} | "
                     f"{statistics.median(o.sending for o in runs):.2f} | {load} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ordering", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--ids", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="runs of every contender, in alternating order")
    parser.add_argument("--only", default="", help="contenders by name, e.g. lowkiq,arq (default all)")
    parser.add_argument("--smoke", action="store_true", help="200 versions over 10 ids: only checks that it works")
    args = parser.parse_args(argv)
    total, ids = (200, 10) if args.smoke else (args.versions, args.ids)
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    chosen = [c for c in CONTENDERS if not wanted or c.name in wanted]
    sent = versions(total, ids)
    outcomes = run_rounds(chosen, sent, args.rounds)
    print()
    print(table(outcomes, total, ids, args.rounds))
    return 1 if disordered(outcomes) else 0


def run_rounds(chosen: list[Contender], sent: list[tuple[str, int, float]],
               rounds: int) -> dict[Contender, list[Outcome]]:
    """Every contender ``rounds`` times on one private redis-server, the order reversed every other round."""
    assert all(job_id != READY for job_id, _, _ in sent)
    outcomes: dict[Contender, list[Outcome]] = {c: [] for c in chosen}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="lowkiq-ordering-") as file, RedisServer() as server:
        json.dump(sent, file)
        file.flush()
        client = server.client()
        for r in range(rounds):
            for contender in chosen if r % 2 == 0 else chosen[::-1]:
                outcomes[contender].append(run_one(contender, server.url, client, sent, file.name))
    return outcomes


def disordered(outcomes: dict[Contender, list[Outcome]]) -> bool:
    """Whether lowkiq applied a version out of order or left an id older (said on stderr)."""
    lowkiq = [o for runs in outcomes.values() for o in runs if o.contender.name == "lowkiq"]
    if any(o.out_of_order or o.left_older for o in lowkiq):
        print("\nlowkiq did not keep every id's order", file=sys.stderr)
        return True
    return False


if __name__ == "__main__":
    sys.exit(main())
