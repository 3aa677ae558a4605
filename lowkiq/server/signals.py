"""Process signals of a running server.

SIGTERM and SIGINT ask the threads to stop after their current batch; an
idle thread is woken at once. A second signal stops waiting for performs
still running: child processes (``isolation = "process"``) are killed with
SIGKILL and reaped, and their batches go back to the queue; the process
releases what it can and exits, and the shards of thread-isolated performs
still running are taken over when their leases expire. SIGTTIN dumps every thread's
stack to ``settings.ttin_file`` and to the log, for a server that seems stuck.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("lowkiq.server")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# What a server process needs beyond the stop signals: the thread dump, and killing and timing child processes.
# Looked up when a server starts, never at import: enqueueing must import everywhere.
POSIX_SIGNALS = ("SIGTTIN", "SIGKILL", "SIGALRM")


def lacking() -> list[str]:
    """The signals a server needs that this platform does not have (none on Linux and macOS)."""
    return [name for name in POSIX_SIGNALS if not hasattr(signal, name)]


def stacks() -> str:
    """Every thread's stack, newest frame last, as text."""
    names = {t.ident: t.name for t in threading.enumerate()}
    lines = [f"lowkiq thread dump at {time.strftime('%Y-%m-%d %H:%M:%S')}, {len(names)} threads\n"]
    for ident, frame in sys._current_frames().items():
        lines.append(f"\n--- thread {names.get(ident, '?')} ({ident})\n")
        lines.extend(traceback.format_stack(frame))
    return "".join(lines)


def dump_stacks(path: str) -> str:
    text = stacks()
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        log.error("could not write the thread dump to %s: %s", path, exc)
    log.info("thread dump (also in %s):\n%s", path, text)
    return text


def install(stop: threading.Event, ttin_file: str, force: threading.Event | None = None) -> Callable[[], None]:
    """Install the handlers (main thread only); returns a function putting the old ones back."""

    def on_stop(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            log.info("%s again: exiting without waiting for the performs still running (child processes are "
                     "killed)", name)
            if force is not None:
                force.set()
        else:
            log.info("%s: stopping after the in-flight batches", name)
            stop.set()

    def on_ttin(signum: int, frame: FrameType | None) -> None:
        dump_stacks(ttin_file)

    previous = {s: signal.signal(s, on_stop) for s in STOP_SIGNALS}
    previous[signal.SIGTTIN] = signal.signal(signal.SIGTTIN, on_ttin)

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return restore
