"""The server: this process's threads, and its keeper, over the shards it holds the leases of.

Any number of server processes run the same app; they share the shards
through per-shard leases in Redis (see ``keeper`` and ``leases``). Start-up
order: the workers are registered (for the console), ``on_server_init``
runs, then the threads and the keeper start; the keeper acquires shards and
hands them to the threads. A shard whose previous owner died is taken over
when its lease expires, its in-flight batch going back to the queue in the
same step; a live owner's batch is never touched.

Stopping (SIGTERM, SIGINT, ``shutdown()``): the process tells the others it
is draining, every thread finishes its batch, acknowledges it and releases
its shards, and the process leaves the membership; child processes
(``isolation = "process"``) finish their batch and exit. A thread-isolated
perform still running after ``shutdown_timeout`` (or at a second signal) is
left behind: its shard is taken over when its lease expires and that batch
runs again. A child still performing then is killed (SIGKILL) and reaped
before the process exits, and its batch goes back to the queue at once.

Example::

    server = Server(lowkiq.configure(workers=[OrdersWorker]))
    exit_code = server.run()   # returns after SIGTERM / SIGINT
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import MetricsPortError as MetricsPortError
from ..errors import NoWorkers as NoWorkers
from ..store import eviction
from . import signals
from .async_executor import AsyncExecutor, Pools, split_workers
from .cpu_pinning import cpu_of, pin
from .keeper import Keeper
from .process_isolation import kill_all_children, serving
from .processor import Processor
from .shard_pool import ShardPool, pooled
from .suspect_batches import SuspectBatches
from .waker import Waker

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger("lowkiq.server")
# Seconds an exiting server waits for the threads whose child processes it killed: each hands its
# shards back in one round trip.
CHILD_THREADS_WAIT = 3.0


class Server:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.stop = threading.Event()
        self.force = threading.Event()  # a second signal: do not wait for running performs
        self.processors: list[Processor] = []
        self.keeper: Keeper | None = None
        self.waker: Waker | None = None
        self.executor: AsyncExecutor | None = None  # async workers' event loop (docs/async.md)
        self._fatal: BaseException | None = None
        self._fatal_in_perform = False
        self._lock = threading.Lock()

    def run(self, *, handle_signals: bool = True) -> int:
        """Serve until stopped; the exit code: 0 after a signal or ``shutdown()``, 1 after a fatal error."""
        uninstall = None
        if handle_signals and threading.current_thread() is threading.main_thread():
            uninstall = signals.install(self.stop, self.settings.ttin_file, force=self.force)
        try:
            self.start()
            while not self.stop.is_set():
                self.stop.wait(1.0)
            self.join()
        except BaseException as exc:
            self.stop.set()
            self.join()
            self._last_words(exc)
            raise
        finally:
            if uninstall is not None:
                uninstall()
        if self._fatal is not None:
            if not self._fatal_in_perform:
                self._last_words(self._fatal)
            return 1
        return 0

    def start(self) -> None:
        s = self.settings
        if not s.workers:
            raise NoWorkers("no workers configured: the app must call lowkiq.configure(workers=[...])")
        if s.cpus:
            # Before the threads start: they inherit it. A supervisor's child gets its own single CPU.
            cpu = cpu_of(s.cpus, 0)
            pin(cpu)
            log.info("server: held to CPU %d (cpus)", cpu)
            if len(s.cpus) > 1 and s.processes == 1:
                log.warning("server: cpus lists %d CPUs, but one process is held to one CPU: to use the others, "
                            "run --processes %d", len(s.cpus), len(s.cpus))
        serving()
        self.runtime.register(s.workers)
        evicting = eviction.check(self.runtime.client)
        if evicting:
            log.warning("server: %s", eviction.warning(evicting))
        if s.metrics_port:
            from .health import Health
            from .process_metrics import ProcessMetrics  # only a process that serves metrics loads the client

            metrics = ProcessMetrics()
            self.runtime.events.subscribe(metrics)
            try:
                metrics.serve(s.metrics_port, Health(lambda: self.keeper, s.lease_ttl))
            except OSError as exc:
                raise MetricsPortError(f"cannot serve metrics on port {s.metrics_port}: {exc}") from exc
            log.info("server: Prometheus metrics at http://0.0.0.0:%d/metrics, probes at /healthz and /readyz",
                     s.metrics_port)
        if s.on_server_init is not None:
            s.on_server_init()
        isolation = SuspectBatches(suspect_wait=s.suspect_wait)
        # two connections, as a thread's: a probe's pipeline and a slot map's rediscovery beside it
        pool = ShardPool(s, self.runtime.new_client(2), self.runtime.due_clock()) if pooled(s) else None
        self.processors = [Processor(i, self.runtime, self.stop, self._on_fatal, isolation, pool)
                           for i in range(s.threads_per_node)]
        _, async_workers = split_workers(s.workers)
        # Async workers need the pool: configure refuses them with a splitter.
        if async_workers and pool is not None:
            self.executor = AsyncExecutor(self.runtime, async_workers, self.stop, self._on_fatal,
                                          first_number=s.threads_per_node)
        slots = self.executor.slots if self.executor is not None else []
        pools = Pools(pool, self.executor.pools) if self.executor is not None and pool is not None else pool
        self.keeper = Keeper(self.runtime, [*self.processors, *slots], pool=pools)
        log.info("server %s: %d threads for %d shards of %s, shared through leases with the other live servers",
                 self.keeper.member_id[:8], s.threads_per_node, sum(w.shards_count for w in s.workers),
                 ", ".join(w.__name__ for w in s.workers))
        self.waker = Waker(self.runtime.new_client(1), [*self.processors, *slots], self.stop, s.poll_interval,
                           on_members=self.keeper.wake.set)
        for p in self.processors:
            p.start()
        if self.executor is not None:
            self.executor.start()
        self.keeper.start()
        self.waker.start()

    def shutdown(self) -> None:
        """Ask every thread to stop after its current batch (what SIGTERM does)."""
        self.stop.set()

    def join(self) -> None:
        """Wait for the threads (at most ``shutdown_timeout``), then release what is left and leave."""
        if self.keeper is not None:
            self.keeper.drain()
        for p in self.processors:
            p.wake.set()
        deadline = time.monotonic() + self.settings.shutdown_timeout
        next_note = time.monotonic() + 5.0
        for p in self.processors:
            # Short joins: a second signal (``force``) must end the wait at once.
            while p.thread.is_alive() and not self.force.is_set() and time.monotonic() < deadline:
                p.join(0.1)
                if p.thread.is_alive() and time.monotonic() >= next_note:
                    next_note += 5.0
                    log.info("waiting for thread %d to finish its batch (at most %.0f s more)", p.number,
                             max(0.0, deadline - time.monotonic()))
        executor = self.executor
        if executor is not None:
            executor.wake_all()
            while executor.alive() and not self.force.is_set() and time.monotonic() < deadline:
                executor.join(0.1)
        running = [p for p in self.processors if p.thread.is_alive()]
        # No child process may outlive this one, and one killed and reaped cannot write any more: its
        # thread writes nothing for its batch and hands its shards back, which puts the batch back in
        # the queue now rather than when the lease expires. A short wait for those threads (a
        # thread-isolated perform cannot be stopped: it is left behind as before).
        if running and kill_all_children():
            until = time.monotonic() + CHILD_THREADS_WAIT
            for p in running:
                p.join(max(0.0, until - time.monotonic()))
            running = [p for p in running if p.thread.is_alive()]
        in_flight = [p.in_flight for p in running if p.in_flight is not None]
        still = len(running)
        if executor is not None and executor.alive():
            in_flight += executor.in_flight()
            still += len(executor.in_flight())
        if still:
            log.warning("exiting with %d performs still running; their shards are taken over when their leases "
                        "expire (%.0f s) and those batches run again", still, self.settings.lease_ttl)
        if self.waker is not None:
            self.waker.join(2.0)  # it checks the stop every second
        if self.keeper is not None:
            self.keeper.leave(keep=in_flight)
        self.runtime.close()

    def _on_fatal(self, exc: BaseException, in_perform: bool) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal, self._fatal_in_perform = exc, in_perform
        self.stop.set()

    def _last_words(self, exc: BaseException) -> None:
        if self.settings.last_words is None:
            return
        try:
            self.settings.last_words(exc)
        except Exception:
            log.exception("last_words raised")
