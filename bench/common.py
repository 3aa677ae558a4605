"""What every benchmark shares: sizes, the lowkiq server subprocess, Redis counters, results."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis

from . import ROOT

APPS = Path(ROOT) / "bench" / "apps"
MARK_FIRST, MARK_LAST = "bench:first", "bench:last"


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark is; ``SMOKE`` keeps the whole suite under a minute."""

    smoke: bool
    runs: int
    jobs: int                 # items 1, 2, 4 (lowkiq side), 5
    slice: int                # enqueue slice
    merge_ids: int            # item 3 and 5
    merge_versions: int
    rq_jobs: int              # item 4: RQ SimpleWorker and Dramatiq
    rq_fork_jobs: int         # item 4: RQ's default forking worker, extrapolated
    others_runs: int
    console_workers: int      # item 6
    console_shards: int
    console_queued: int
    console_dead: int
    console_requests: int


FULL = Sizes(smoke=False, runs=3, jobs=100_000, slice=10_000, merge_ids=1_000, merge_versions=100,
             rq_jobs=100_000, rq_fork_jobs=2_000, others_runs=1, console_workers=50, console_shards=24,
             console_queued=1_000_000, console_dead=100_000, console_requests=200)
SMOKE = Sizes(smoke=True, runs=1, jobs=2_000, slice=1_000, merge_ids=200, merge_versions=10,
              rq_jobs=300, rq_fork_jobs=20, others_runs=1, console_workers=3, console_shards=24,
              console_queued=5_000, console_dead=500, console_requests=20)


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of an item's table. ``ok`` is None when the line has no target."""

    metric: str
    measured: str
    target: str = ""
    ok: bool | None = None

    @property
    def verdict(self) -> str:
        return "" if self.ok is None else ("PASS" if self.ok else "MISS")


@dataclass
class ItemResult:
    number: int
    title: str
    setup: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # markdown paragraphs: profiles, explanations

    def row(self, metric: str, measured: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append(Row(metric, measured, target, ok))

    def note(self, text: str) -> None:
        self.notes.append(text.strip())


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """'median (all runs)' for a table cell."""
    med = fmt.format(median(values))
    if len(values) == 1:
        return med
    return f"{med} ({', '.join(fmt.format(v) for v in values)})"


def log(message: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {message}", flush=True)


# --- Redis counters ----------------------------------------------------------------------------


@dataclass
class RedisCounters:
    """Deltas of what Redis itself counts, between ``start()`` and ``stop()``."""

    client: redis.Redis
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    commandstats: dict[str, dict[str, float]] = field(default_factory=dict)

    def _snapshot(self) -> dict[str, float]:
        info = self.client.info("all")
        return {k: float(info[k]) for k in ("used_cpu_user", "used_cpu_sys", "total_net_input_bytes",
                                             "total_net_output_bytes", "total_commands_processed")}

    def start(self) -> RedisCounters:
        self.client.config_resetstat()
        self.client.slowlog_reset()
        self.before = self._snapshot()
        return self

    def stop(self) -> RedisCounters:
        self.after = self._snapshot()
        self.commandstats = {k.removeprefix("cmdstat_"): v for k, v in self.client.info("commandstats").items()}
        return self

    def delta(self, key: str) -> float:
        return self.after[key] - self.before[key]

    @property
    def cpu_seconds(self) -> float:
        return self.delta("used_cpu_user") + self.delta("used_cpu_sys")

    def calls(self, command: str) -> int:
        return int(self.commandstats.get(command, {}).get("calls", 0))

    def usec_per_call(self, command: str) -> float:
        return float(self.commandstats.get(command, {}).get("usec_per_call", 0.0))

    def top(self, n: int = 6) -> list[tuple[str, int, float, float]]:
        """(command, calls, usec total, usec per call), most time first; commands inside scripts included."""
        rows = [(k, int(v["calls"]), float(v["usec"]), float(v["usec_per_call"])) for k, v in self.commandstats.items()]
        return sorted(rows, key=lambda r: -r[2])[:n]

    def slowlog(self, n: int = 5) -> list[dict[str, Any]]:
        return self.client.slowlog_get(n)


# --- the lowkiq server as a real process --------------------------------------------------------


def lowkiq_command() -> list[str]:
    """The installed ``lowkiq`` console script of the interpreter running the bench."""
    script = Path(sys.executable).parent / "lowkiq"
    if not script.exists():
        raise RuntimeError(f"no lowkiq command next to {sys.executable}: install the package (make install)")
    return [str(script)]


class LowkiqServer:
    """``lowkiq -r bench/apps/<app>.py --threads N --scheduler S`` against one Redis."""

    def __init__(self, app: str, redis_url: str, *, threads: int = 5, scheduler: str = "lag",
                 env: dict[str, str] | None = None, cpus: set[int] | None = None,
                 command: list[str] | None = None, args: Sequence[str] = ()) -> None:
        self.app = APPS / f"{app}.py"
        self.command = command or lowkiq_command()  # item 7: ``python -m lowkiq.cli`` of another checkout
        self.cpus = cpus  # pin the server (all its threads) to these CPUs
        self.redis_url = redis_url
        self.threads = threads
        self.scheduler = scheduler
        self.args = list(args)  # more of lowkiq's options, e.g. --processes 2
        self.env = {**os.environ, "LOWKIQ_REDIS_URL": redis_url, **(env or {})}
        self.env.pop("REDIS_URL", None)
        self.process: subprocess.Popen[bytes] | None = None
        # Kept open for the server's whole life, read after it stops (closed in __exit__).
        self.stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="lowkiq-bench-server-", suffix=".log", delete=False)

    def __enter__(self) -> LowkiqServer:
        command = [*self.command, "-r", str(self.app), "--threads", str(self.threads),
                   "--scheduler", self.scheduler, "--log-level", "WARNING", *self.args]
        self.process = subprocess.Popen(command, env=self.env, cwd=tempfile.gettempdir(),
                                        stdout=subprocess.DEVNULL, stderr=self.stderr,
                                        preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None)
        self.ps = psutil.Process(self.process.pid)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def check_alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the lowkiq server exited with {self.process.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = Path(self.stderr.name).read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def cpu_seconds(self) -> float:
        """CPU of the server and of its children (``--processes``), as far as they are alive."""
        total = 0.0
        for process in [self.ps, *self.ps.children(recursive=True)]:
            try:
                t = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
        return total

    def peak_rss(self) -> int:
        """VmHWM: the process's peak resident set, in bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return self.ps.memory_info().rss

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()
        os.unlink(self.stderr.name)


def wait_for(predicate: Callable[[], bool], *, timeout: float, interval: float = 0.02,
             alive: Callable[[], None] | None = None, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@dataclass
class Drain:
    """One drained queue: when the first job started and the last one ended (unix time)."""

    first: float
    last: float
    server_cpu: float = 0.0   # seconds of the server process between the two marks (polled)
    peak_rss: int = 0

    @property
    def seconds(self) -> float:
        return self.last - self.first


def wait_drained(client: redis.Redis, *, timeout: float, alive: Callable[[], None] | None = None,
                 cpu: Callable[[], float] | None = None) -> Drain:
    """Wait for the app's marks; sample the server's CPU time when the first mark appears."""
    cpu_at_first = None
    deadline = time.monotonic() + timeout
    while True:
        first, last = client.mget(MARK_FIRST, MARK_LAST)
        if first is not None and cpu_at_first is None and cpu is not None:
            cpu_at_first = cpu()
        if last is not None:
            break
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the queue did not drain in {timeout:.0f} s")
        time.sleep(0.02)
    used = (cpu() - cpu_at_first) if cpu is not None and cpu_at_first is not None else 0.0
    return Drain(float(first), float(last), used)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def as_served(runtime: Any, worker: Any) -> bool:
    """``worker``'s shards switched to integer microsecond scores, as every server leaves them within seconds of
    its start (the keeper's score_migration duty), so that a drain measures what a running deployment pays and not
    the one-time migration of a queue written before any server ran (``bench.score_units`` measures that apart).
    False for code from before integer scores (``python -m bench.versus --before REV``), which writes seconds."""
    import importlib.util

    if importlib.util.find_spec("lowkiq.store.score_units") is None:
        return False
    from lowkiq.store import lua, score_units

    lua.run_many(runtime.client, [score_units.migrate_call(shard) for shard in runtime.queue(worker).keys.shards()])
    return True


def hold(queue: Any, shard: int, member: str, ttl: float) -> Any:
    """Shard ``shard``'s lease of ``queue``'s worker for ``member``, as a server acquires it (its holdings).

    Code from before ``lowkiq.server.holdings`` (``python -m bench.versus --before REV``) took a lease
    with ``queue.acquire``; that is used when the holdings are missing.
    """
    import lowkiq
    try:
        from lowkiq.server.holdings import Holdings
    except ModuleNotFoundError:
        lease = queue.acquire(shard, member, ttl=ttl)
        if type(lease).__name__ != "Lease":
            raise RuntimeError(f"shard {shard} of {queue.worker.__name__} is held by another process: {lease}") from None
        return lease
    from lowkiq.store import lua
    from lowkiq.store.leases import Lease
    from lowkiq.worker import Shard

    wire = lua.Wire(queue.client)
    try:
        [lease] = Holdings(lowkiq.current(), member).acquire(wire, [Shard(queue.worker, shard)], ttl=ttl)
    finally:
        wire.close()
    if not isinstance(lease, Lease):
        raise RuntimeError(f"shard {shard} of {queue.worker.__name__} is held by another process: {lease}")
    return lease
