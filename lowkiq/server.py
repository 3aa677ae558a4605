"""The server: this node's threads over its shards of every worker.

Start-up order matters: the workers are registered (for the console), the
processing areas of the shards this node owns are put back into the queue
(a previous process may have died mid-batch), ``on_server_init`` runs, and
only then do threads start taking jobs.

Example::

    server = Server(lowkiq.configure(workers=[OrdersWorker]))
    exit_code = server.run()   # returns after SIGTERM / SIGINT
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

from . import signals, splitters
from .processor import Processor

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger("lowkiq.server")


class NoWorkers(RuntimeError):
    pass


class Server:
    def __init__(self, runtime: "Runtime") -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.stop = threading.Event()
        self.processors: list[Processor] = []
        self._fatal: BaseException | None = None
        self._fatal_in_perform = False
        self._lock = threading.Lock()

    def run(self, *, handle_signals: bool = True) -> int:
        """Serve until stopped; the exit code: 0 after a signal or ``shutdown()``, 1 after a fatal error."""
        uninstall = None
        if handle_signals and threading.current_thread() is threading.main_thread():
            uninstall = signals.install(self.stop, self.settings.ttin_file)
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
        parts = splitters.assign(s)
        self.runtime.register(s.workers)
        restored = self.restore([shard for part in parts for shard in part])
        log.info("node %d/%d: %d threads, %d shards of %s; %d jobs left in processing went back to the queue",
                 s.node_number, s.number_of_nodes, sum(1 for p in parts if p), sum(map(len, parts)),
                 ", ".join(w.__name__ for w in s.workers), restored)
        if s.on_server_init is not None:
            s.on_server_init()
        self.processors = [Processor(i, part, self.runtime, self.stop, self._on_fatal) for i, part in enumerate(parts) if part]
        for p in self.processors:
            p.start()

    def restore(self, shards: list[splitters.Shard]) -> int:
        by_worker = defaultdict(list)
        for shard in shards:
            by_worker[shard.worker].append(shard.index)
        return sum(self.runtime.queue(w).restore(indexes) for w, indexes in by_worker.items())

    def shutdown(self) -> None:
        """Ask every thread to stop after its current batch (what SIGTERM does)."""
        self.stop.set()

    def join(self) -> None:
        for p in self.processors:
            while p.thread.is_alive():
                p.join(5.0)
                if p.thread.is_alive():
                    log.info("waiting for thread %d to finish its batch", p.number)
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
