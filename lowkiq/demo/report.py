"""The demo server's log: a line per failure class per interval and a running summary.

The demo fails jobs on purpose, hundreds a minute. lowkiq's server logs every
failing batch (with its traceback the first time), which buries the demo's
story; here a server middleware counts what happens, a logging filter folds
the server's per-batch failure lines into those counts, and every interval
one line per (worker, exception class) and one summary line are logged::

    OrderUpdates ValueError x4 in 10 s, e.g. order 194: customer record is missing
    Emails RuntimeError x31 in 10 s, e.g. SMTP 451: try again later
    summary: 9,120 ids processed, 35 batches failed, 6 ids moved to the morgue (since start)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("lowkiq.demo")
SERVER_LOGGER = "lowkiq.server"
# A failing batch's own log lines come right after it fails, in its thread.
FOLD_WINDOW = 2.0


class Report(logging.Filter):
    def __init__(self, every: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self._lock = threading.Lock()
        self._failing = threading.local()
        self._failures: Counter[tuple[str, str]] = Counter()
        self._examples: dict[tuple[str, str], str] = {}
        self.processed = 0
        self.failed = 0
        self.morgued = 0
        self.folded = 0

    # ---- counting ---------------------------------------------------------

    def middleware(self, worker: Any, batch: Any, call_next: Callable[[], Any]) -> Any:
        """A server middleware: counts every batch's outcome."""
        self._failing.since = None
        try:
            result = call_next()
        except Exception as exc:
            key = (type(worker).__name__, type(exc).__name__)
            with self._lock:
                self._failures[key] += 1
                self._examples.setdefault(key, str(exc))
                self.failed += 1
            self._failing.since = self.clock()
            raise
        with self._lock:
            self.processed += len(batch)
        return result

    def retries_exhausted(self, batch: Sequence[Any]) -> None:
        """Call from a worker's ``retries_exhausted``."""
        with self._lock:
            self.morgued += len(batch)

    def filter(self, record: logging.LogRecord) -> bool:
        """On the server's logger: drop its warnings and errors about a batch that just failed here."""
        since = getattr(self._failing, "since", None)
        if record.levelno >= logging.WARNING and since is not None and self.clock() - since < FOLD_WINDOW:
            with self._lock:
                self.folded += 1
            return False
        return True

    # ---- reporting --------------------------------------------------------

    def lines(self) -> list[str]:
        """The interval's lines (one per failure class, then the summary); starts the next interval."""
        with self._lock:
            failures, examples = self._failures, self._examples
            self._failures, self._examples = Counter(), {}
            processed, failed, morgued = self.processed, self.failed, self.morgued
        out = [f"{worker} {error} x{count} in {self.every:g} s, e.g. {examples[(worker, error)]}"
               for (worker, error), count in sorted(failures.items())]
        out.append(f"summary: {processed:,} ids processed, {failed:,} batches failed, "
                   f"{morgued:,} ids moved to the morgue (since start)")
        return out

    def start(self) -> None:
        """Fold the server's failure lines and log a report every interval (an ``on_server_init``)."""
        logging.getLogger(SERVER_LOGGER).addFilter(self)
        threading.Thread(target=self._loop, name="demo-report", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.every)
            for line in self.lines():
                log.info("%s", line)
