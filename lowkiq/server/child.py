"""A child process performing one process-isolated worker's batches (``Worker.isolation = "process"``).

Started by its server's ``spares`` (and then handed to a server thread's ``ChildSlot``) as ``python -m
lowkiq.server.child APP WORKER PARENT_PID REQUESTS_FD REPLIES_FD``: it loads the app file (so the app's
middlewares, serializers and ``format_error`` are the ones its server uses), answers ``("ready",)``,
then performs each batch it is sent, through the server middlewares, with ``lowkiq.context()`` set and
the worker's soft time limit armed, and answers with the outcome and its resident memory. It exits at
EOF on its requests (the server stops or recycles it) and never outlives its server: the kernel kills it
when the server dies (``PR_SET_PDEATHSIG``), and a watcher thread exits when the parent pid changes
(other systems, or a parent that died before the first).

Its server kills it at ``time_limit + time_limit_grace``, but a paused server (SIGSTOP, a frozen VM)
kills nothing: so the child also ends itself then, by a SIGALRM left to its default action, which the
kernel carries out whatever the perform does (blocked in C code, holding the GIL). A batch whose lease
snapshot has passed its deadline when it arrives (its server was paused between its lease check and
the hand-off) is not performed: the child answers ``("expired",)``.

Signals: the child runs in a session of its own (its server spawns it so), so a terminal's Ctrl-C never
reaches it, and its server kills its whole process group when it must. A SIGINT or SIGTERM sent to it
anyway (``systemd`` stopping a unit signals every process of it) is for the server, which lets the child
finish its batch, then closes its requests: the child catches both with a handler that does nothing.
A handler, not SIG_IGN: an ignored signal stays ignored across ``exec``, so every subprocess a perform
ran would ignore SIGINT and SIGTERM too; a handler is reset to the default by ``exec``, and a fork of the
child (``os.fork``, multiprocessing) gets the defaults back at once (``os.register_at_fork``), with the
child's pipes closed there, which are no business of a perform's subprocess.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import sys
import threading
import time
from functools import partial
from typing import Any

from .. import app_file, job_context, stored_error
from ..errors import PartialFailure
from ..middleware import run_chain
from .child_process import HEADER
from .process_isolation import WATCHDOG

PR_SET_PDEATHSIG = 1


class LeaseSnapshot:
    """The lease as the server knew it when it sent the batch (a child cannot renew it or ask Redis):
    past its deadline ``is_lost`` answers True, the safe answer for a write that cannot be fenced."""

    def __init__(self, fencing_token: tuple[int, int], deadline: float) -> None:
        self._token = fencing_token
        self._deadline = deadline

    @property
    def fencing_token(self) -> tuple[int, int]:
        return self._token

    @property
    def deadline(self) -> float:
        return self._deadline  # time.monotonic() is one clock for every process of a host

    def remaining(self) -> float:
        return self._deadline - time.monotonic()

    def is_lost(self) -> bool:
        return self.remaining() < 0


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="lowkiq-parent-watch", daemon=True).start()


def _protect(requests: int, replies: int) -> None:
    """Stop signals do nothing to the child itself; its perform's subprocesses get the default handling."""
    for fd in (requests, replies):
        os.set_inheritable(fd, False)  # an exec'd subprocess never holds them
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _ignored)
        signal.siginterrupt(sig, False)  # a system call it interrupts resumes (SA_RESTART)

    def in_a_fork() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # what a fresh interpreter has
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in (requests, replies):
            with contextlib.suppress(OSError):
                os.close(fd)

    os.register_at_fork(after_in_child=in_a_fork)


def _ignored(signum: int, frame: object) -> None:
    """SIGINT and SIGTERM to a child: its server decides when it ends."""


def _read(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _arm_hard_limit(seconds: float) -> None:
    """End this process ``seconds`` from now unless disarmed first: its own hard time limit.

    Not a Python handler, which runs only between bytecodes of the main thread: SIGALRM's default action
    terminates the process in the kernel. Reset first, as the app or a perform may have set a handler.
    """
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm_hard_limit() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    app, worker_name, parent, requests, replies = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    _die_with_parent(parent)
    _protect(requests, replies)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=f"%(asctime)s child {os.getpid()} %(levelname)s %(message)s")

    def send(message: Any) -> None:
        body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(HEADER.pack(len(body)) + body)
        while data:
            data = data[os.write(replies, data):]

    try:
        runtime = app_file.load(app)
        worker_class = next(w for w in runtime.settings.workers if w.__name__ == worker_name)
        worker = worker_class()
    except StopIteration:
        send(("broken", f"{app} configures no worker named {worker_name}"))
        return 1
    except Exception as exc:
        send(("broken", f"{type(exc).__name__}: {exc}"))
        return 1
    settings = runtime.settings
    middlewares = settings.server_middlewares
    limit = worker_class.time_limit
    hard_limit = None if limit is None else limit + worker_class.time_limit_grace
    send(("ready",))

    def formatted(exc: BaseException) -> tuple[str, str | None]:
        try:
            message = str(settings.format_error(exc))
        except Exception:
            message = f"{type(exc).__name__}: {exc}"
        return message, stored_error.format_traceback(exc, settings.traceback_limit)

    while True:
        try:
            size = HEADER.unpack(_read(requests, HEADER.size))[0]
            _, batch, ctx = pickle.loads(_read(requests, size))
        except EOFError:
            return 0
        lease = LeaseSnapshot(tuple(ctx["fencing_token"]), ctx["lease_deadline"])
        if lease.is_lost():
            # Another server may hold the shard and run this batch: it must not run here too.
            send(("expired", _rss_mib()))
            continue
        if hard_limit is not None:
            _arm_hard_limit(hard_limit)
        deadline = None if limit is None else time.monotonic() + limit
        context = job_context.Context(ctx["worker"], ctx["shard"], lease)
        job_context.enter(context, deadline)
        armed = None if limit is None else WATCHDOG.arm(limit, f"{worker_name} shard {ctx['shard']} (child)")
        reply: tuple[Any, ...]
        try:
            try:
                if middlewares:
                    run_chain(middlewares, worker, batch, partial(worker.perform, batch))
                else:
                    worker.perform(batch)
            finally:
                if armed is not None:
                    WATCHDOG.disarm(armed)
            reply = ("ok",)
        except PartialFailure as exc:
            reply = ("partial", {job_id: formatted(e) for job_id, e in exc.failures.items()})
        except Exception as exc:
            reply = ("error", *formatted(exc), type(exc).__name__)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the server fails the batch and stops
            if hard_limit is not None:
                _disarm_hard_limit()
            send(("stop", *formatted(exc), type(exc).__name__, _rss_mib()))
            return 1
        finally:
            if armed is not None:
                WATCHDOG.disarm(armed)  # again: the limit may have fired between perform's return and its disarm
            job_context.leave()
        if hard_limit is not None:
            _disarm_hard_limit()  # before the outcome: left armed, it would end the child under its next batch
        send((*reply, _rss_mib()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
