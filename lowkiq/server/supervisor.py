"""``lowkiq -r app.py --processes N``: N server processes under one parent, for more than one core.

The children are ordinary server processes (``python -m lowkiq.cli`` with the same
arguments): they share the shards through the leases, as separately started servers
do, so no node numbers are involved. The parent forwards TERM, INT and TTIN to them
(a second TERM too, which makes them stop without waiting for running performs),
and restarts a child that dies, after a pause that doubles while children keep
dying young. A child that exits with status 2 (a mistake in the configuration,
which a restart would repeat) stops them all. Children are in their own session,
so a Ctrl-C in a terminal reaches them once, through the parent, and they are sent
TERM if the parent itself dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .cpu_pinning import cpu_of

log = logging.getLogger("lowkiq.server")

EXIT_USAGE = 2
FIRST_RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0
# A child that lived this long died of something else than a crash loop: its next restart waits the least.
HEALTHY_AFTER = 60.0
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGTTIN)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: TERM when the parent dies (Linux), so no server outlives its supervisor."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: a child may outlive a killed parent
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    number: int
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    delay: float = FIRST_RESTART_DELAY
    restart_at: float | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "lowkiq.cli", *self.argv], start_new_session=True,
                                        preexec_fn=_die_with_parent)
        self.started = time.monotonic()
        self.restart_at = None
        log.info("supervisor: process %d started (pid %d)", self.number, self.process.pid)

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)


class Supervisor:
    def __init__(self, argvs: Sequence[list[str]]) -> None:
        self.children = [Child(n, argv) for n, argv in enumerate(argvs)]
        self.stopping = 0  # TERM/INT signals received
        self.wake = threading.Event()
        self.fatal: int | None = None

    def run(self) -> int:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in FORWARDED}
        try:
            for child in self.children:
                child.start()
            log.info("supervisor: %d server processes share the shards", len(self.children))
            while not self._all_exited():
                self._watch()
                self.wake.wait(0.2)
                self.wake.clear()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self.fatal is not None:
            return self.fatal
        # How each child ended this time (earlier deaths were restarted): 0 only when every one stopped cleanly.
        codes = [c.process.returncode for c in self.children if c.process is not None]
        return 0 if all(code == 0 for code in codes) else 1

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping += 1
            log.warning("supervisor: %s: stopping the %d server processes%s", signal.Signals(signum).name,
                        len(self.children), "" if self.stopping == 1 else " without waiting for running performs")
        for child in self.children:
            child.signal(signal.SIGTERM if signum == signal.SIGINT else signum)
        self.wake.set()

    def _all_exited(self) -> bool:
        """Stopping (or stopped by a fatal child) and no child runs: restarts still pending are dropped."""
        if not self.stopping and self.fatal is None:
            return False
        return all(c.process is None or c.process.poll() is not None for c in self.children)

    def _watch(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.process is None or child.process.poll() is None:
                continue
            if child.restart_at is None:
                self._settled(child, child.process.returncode)
            elif now >= child.restart_at and not self.stopping and self.fatal is None:
                child.start()

    def _settled(self, child: Child, code: int) -> None:
        """Decide about a child that just exited: restart it later, or leave it down."""
        if child.started == 0.0:  # decided already
            return
        lived = time.monotonic() - child.started
        child.started = 0.0
        if self.stopping or self.fatal is not None:
            return
        if code == EXIT_USAGE:
            log.error("supervisor: process %d exited with status 2 (a configuration mistake a restart would repeat); "
                      "stopping the others", child.number)
            self.fatal = EXIT_USAGE
            for other in self.children:
                other.signal(signal.SIGTERM)
            return
        child.delay = FIRST_RESTART_DELAY if lived >= HEALTHY_AFTER else child.delay
        child.restart_at = time.monotonic() + child.delay
        log.warning("supervisor: process %d (pid %d) exited with %s after %.0f s; restarting it in %.0f s", child.number,
                    child.process.pid if child.process else -1, _status(code), lived, child.delay)
        child.delay = min(MAX_RESTART_DELAY, child.delay * 2)


def _status(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"


def child_argvs(argv: Sequence[str], processes: int, member_name: str, metrics_port: int,
                cpus: tuple[int, ...] = ()) -> list[list[str]]:
    """Each child's arguments: the parent's, then what must differ (the last occurrence of a flag wins)."""
    out = []
    for n in range(processes):
        extra = ["--processes", "1"]
        if member_name:
            extra += ["--member-name", f"{member_name}-{n}"]
        if metrics_port:
            extra += ["--metrics-port", str(metrics_port + n)]
        if cpus:
            extra += ["--cpus", str(cpu_of(cpus, n))]
        out.append([*argv, *extra])
    return out
