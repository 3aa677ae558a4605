"""Time limits and process isolation of performs (``Worker.time_limit``, ``Worker.isolation``).

Thread isolation: one watchdog thread per server process raises ``TimeLimitExceeded`` in the
performing thread at its limit (``PyThreadState_SetAsyncExc``: Python code is interrupted at its
next bytecode; a blocking C call, e.g. ``time.sleep`` or a socket read, only when it returns). A
perform that catches and ignores it keeps running and keeps its shard: nothing can stop a thread
from outside, and letting another perform of the same id start would be an overlap. It is flagged
instead (log, metrics event ``time_limit_ignored``).

On Python 3.13 and later an asynchronous exception may also be raised at a loop's backward jump,
an instruction the compiler leaves outside the enclosing ``try``'s range of the exception table:
raised there, it skips the perform's own ``except`` and ``finally`` blocks (CPython issue gh-130279;
``while time.monotonic() < end: pass`` lost them in most runs on 3.13.0). There the
watchdog raises it at the start of the thread's next line instead (``LineRaiser``: a
``sys.monitoring`` LINE callback, on for every thread only until it lands), and falls back to the
asynchronous exception when no line came within ``LINE_WINDOW`` (a thread blocked in C code gets it
when the call returns, at the call instruction, which the ``try`` covers).

Process isolation: each server thread that performs a process-isolated worker owns one child
process per such worker (``ChildSlot``; a fresh interpreter running ``lowkiq.server.child``: never a
fork of this process, whose threads hold locks and Redis connections), reused for batch after batch;
batches and outcomes cross two pipes as pickles. At ``time_limit + time_limit_grace``, or when an
operator stops the perform, the child's process group is killed with SIGKILL and the child reaped
(``waitpid`` returned: no thread of it runs any more) before the caller records the failure in Redis,
so the same id can never run twice at once (``child_process``). The child also ends itself then
(SIGALRM, see ``child``): a paused server kills nothing, and its lease may pass to another server
meanwhile; a child that ended so is a time limit too. A child is replaced at its slot's next batch, by
``start`` before the lease check that precedes the hand-off, with a spare warmed beforehand
(``spares``).
"""

from __future__ import annotations

import ctypes
import dis
import heapq
import itertools
import logging
import math
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import LowkiqError, PerformStopped, TimeLimitExceeded, WorkerCrashed
from . import spares
from .child_process import Child, ChildDied, how

log = logging.getLogger("lowkiq.server")

_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc
IGNORED_AFTER = 1.0  # seconds after TimeLimitExceeded was raised at which a perform still running is flagged
# Seconds the watchdog waits for a thread to reach its next line before it raises the exception asynchronously
# (Python 3.13+): every thread's lines call LineRaiser meanwhile.
LINE_WINDOW = 0.5


# -- thread isolation: the watchdog ----------------------------------------------------------------


@dataclass(eq=False)
class Armed:
    """One perform's time limit, armed on its thread."""

    ident: int
    deadline: float
    label: str
    on_ignored: Callable[[Armed], None] | None = None
    active: bool = True
    fired: bool = False
    ignored: bool = False  # still running IGNORED_AFTER seconds after TimeLimitExceeded
    fired_at: float = 0.0
    at_next_line: bool = False  # fired through LineRaiser, and LINE_WINDOW has not passed yet


class LineRaiser:
    """Raises TimeLimitExceeded in a thread at the start of its next line (Python 3.13+, ``sys.monitoring``).

    A line's first instruction lies inside the ranges of the ``try`` blocks around it, so the perform's
    ``except`` and ``finally`` blocks run. LINE events are on, for every thread, only while a thread has
    an exception pending here: each line of every thread then costs one set lookup.
    """

    TOOL_NAME = "lowkiq time limits"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[int] = set()
        self._tool: int | None = None
        self._claimed = False
        self._events_on = False
        self._backward_jumps = frozenset(dis.opmap[name] for name in ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
                                         if name in dis.opmap)
        self._extended_arg = dis.opmap["EXTENDED_ARG"]

    def start(self, ident: int) -> bool:
        """Raise in thread ``ident`` at its next line; False where this cannot (before 3.13, or no free tool id)."""
        if sys.version_info < (3, 13):
            return False
        with self._lock:
            if not self._claimed:
                self._claimed = True
                self._tool = self._claim()
            if self._tool is None:
                return False
            self._pending.add(ident)
            if not self._events_on:
                sys.monitoring.set_events(self._tool, sys.monitoring.events.LINE)
                self._events_on = True
        return True

    def withdraw(self, ident: int) -> bool:
        """Take back thread ``ident``'s pending exception: True if it was still pending (not raised)."""
        with self._lock:
            if ident not in self._pending:
                return False
            self._pending.discard(ident)
            if not self._pending and self._events_on:
                self._events_on = False
                if sys.version_info >= (3, 13) and self._tool is not None:  # it is: events were on
                    sys.monitoring.set_events(self._tool, 0)
            return True

    def _claim(self) -> int | None:
        if sys.version_info < (3, 13):
            return None
        monitoring = sys.monitoring
        for tool in (4, 3):  # the ids sys.monitoring leaves to other tools than debuggers, coverage and profilers
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, self.TOOL_NAME)
                monitoring.register_callback(tool, monitoring.events.LINE, self._on_line)
                return tool
        log.warning("no free sys.monitoring tool id: time limits raise TimeLimitExceeded asynchronously, which on "
                    "this Python may skip a perform's except and finally blocks")
        return None

    def _on_line(self, code: types.CodeType, line: int) -> None:
        ident = threading.get_ident()
        if ident not in self._pending:
            return
        if code.co_filename == __file__:
            return  # never inside the watchdog's own arming and disarming
        frame = sys._getframe(1)
        instructions, at = frame.f_code.co_code, frame.f_lasti
        while instructions[at] == self._extended_arg:  # a long jump's argument comes first
            at += 2
        if instructions[at] in self._backward_jumps:
            return  # a `continue` line is a backward jump, outside the try's range too: the next line is not
        if self.withdraw(ident):
            raise TimeLimitExceeded


LINES = LineRaiser()


class Watchdog:
    """Raises TimeLimitExceeded in threads whose perform passed its deadline."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._heap: list[tuple[float, int, Armed]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._active = 0  # limits armed and not yet disarmed
        # When the watchdog's thread wakes next, unless notified; -inf while it is awake (or starting), when it
        # looks at the heap before it sleeps again and needs no notice.
        self._wakes_at = -math.inf

    def arm(self, seconds: float, label: str, on_ignored: Callable[[Armed], None] | None = None) -> Armed:
        """Arm a limit for the calling thread's perform, ``seconds`` from now."""
        armed = Armed(threading.get_ident(), time.monotonic() + seconds, label, on_ignored)
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lowkiq-time-limits", daemon=True)
                self._thread.start()
            self._active += 1
            if len(self._heap) > 2 * self._active + 64:
                # A disarmed limit stays in the heap (taking it out is O(n)): now and then they all go at once,
                # long before their deadlines would wake the watchdog for nothing.
                self._heap = [entry for entry in self._heap if entry[2].active]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (armed.deadline, next(self._order), armed))
            if armed.deadline < self._wakes_at:
                # The watchdog sleeps until the earliest deadline it knows: waking it for a later one would cost
                # a thread switch per batch.
                self._changed.notify()
        return armed

    def disarm(self, armed: Armed) -> None:
        """The perform returned (or raised): no exception may reach the thread any more. Idempotent.

        Under the watchdog's lock, so the watchdog either fired before (then a pending exception not
        yet raised is cancelled here: it must not land in lowkiq's own code) or never fires.
        """
        with self._changed:
            if armed.active:
                armed.active = False
                self._active -= 1
                if armed.fired:
                    LINES.withdraw(armed.ident)
                    _SET_ASYNC_EXC(ctypes.c_ulong(armed.ident), None)  # NULL: clear what is pending

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._wakes_at = self._heap[0][0] if self._heap else math.inf
                    self._changed.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                self._wakes_at = -math.inf  # awake: nothing to tell it until it sleeps again
                _, _, armed = heapq.heappop(self._heap)
                if not armed.active:
                    continue
                if not armed.fired:
                    armed.fired = True
                    armed.fired_at = time.monotonic()
                    armed.at_next_line = LINES.start(armed.ident)
                    if not armed.at_next_line:
                        _SET_ASYNC_EXC(ctypes.c_ulong(armed.ident), ctypes.py_object(TimeLimitExceeded))
                    log.warning("%s: perform ran past its time_limit: TimeLimitExceeded raised in it", armed.label)
                    wake = armed.fired_at + (LINE_WINDOW if armed.at_next_line else IGNORED_AFTER)
                    heapq.heappush(self._heap, (wake, next(self._order), armed))
                    continue
                if armed.at_next_line:
                    armed.at_next_line = False
                    if LINES.withdraw(armed.ident):  # no line came: blocked in C code, or gone into it for long
                        _SET_ASYNC_EXC(ctypes.c_ulong(armed.ident), ctypes.py_object(TimeLimitExceeded))
                    heapq.heappush(self._heap, (armed.fired_at + IGNORED_AFTER, next(self._order), armed))
                    continue
                armed.ignored = True
                on_ignored = armed.on_ignored
            log.error("%s: perform still running %.0f s after TimeLimitExceeded was raised in it (it catches it, "
                      "or waits in C code); its shard waits for it. Only isolation = \"process\" can stop it",
                      armed.label, IGNORED_AFTER)
            if on_ignored is not None:
                on_ignored(armed)


WATCHDOG = Watchdog()


# -- process isolation: children --------------------------------------------------------------------


@dataclass
class Outcome:
    """What a child said of a batch, or what became of the child.

    ``kind``: "ok"; "error" (perform raised an Exception: ``message``, ``traceback``); "partial"
    (PartialFailure: ``failures`` {id: (message, traceback)}); "stop" (a BaseException such as
    SystemExit: the batch fails and the server stops); "timeout" (killed past time_limit + grace,
    or ended itself then); "crashed" (the child died: ``message`` says how); "stopped" (an operator
    stopped the perform: its child was killed); "abandoned" (the exiting server killed the child:
    nothing is written, the batch goes back to the queue with the shard); "expired" (the child did
    not perform the batch: its lease's deadline had passed when it came).
    """

    kind: str
    message: str = ""
    traceback: str | None = None
    failures: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    error_class: str = ""

    def exception(self) -> BaseException:
        """An exception standing for this outcome, for events and the log."""
        if self.kind == "timeout":
            return TimeLimitExceeded(self.message)
        if self.kind == "crashed":
            return WorkerCrashed(self.message)
        if self.kind == "stopped":
            return PerformStopped(self.message)
        return ChildError(self.error_class, self.message)


class ChildError(LowkiqError):
    """An exception raised by a perform in a child process, as the parent knows it: its class name and
    its error as ``format_error`` wrote it in the child."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class StopRequested(LowkiqError):
    """Raised by a perform's stop check (``ChildSlot.perform``'s ``stop_requested``) to stop it: ``args[0]``
    says who asked. Caught where the child is waited on; never reaches a perform or a user."""


# How often a thread waiting on a child asks whether an operator asked to stop its perform.
STOP_POLL = 0.5


def app_path(worker: type[Any]) -> str:
    """The app file a child loads to find the worker and the app's settings (middlewares, serializers):
    the one the server was started with (``lowkiq -r app.py``), else the file defining the worker."""
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg in ("-r", "--require") and i + 1 < len(argv):
            return os.path.abspath(argv[i + 1])
        if arg.startswith("--require="):
            return os.path.abspath(arg.split("=", 1)[1])
    module = sys.modules.get(worker.__module__)
    file: str | None = getattr(module, "__file__", None)
    if not file:
        raise WorkerCrashed(f"cannot find the file defining {worker.__name__} to load in a child process")
    return os.path.abspath(file)


class ChildSlot:
    """The child process one server thread performs one process-isolated worker's batches in.

    A child comes from the process's spares (``spares``): warmed beforehand, so that after a kill, a
    crash or a recycle the next batch does not wait for a new interpreter.
    """

    def __init__(self, worker: type[Any], *, spawn_timeout: float = 60.0) -> None:
        self.worker = worker
        self.name = worker.__name__
        self.spawn_timeout = spawn_timeout
        self.child: Child | None = None
        self.last_pid: int | None = None  # the pid that performed (or was killed on) the last batch
        self._not_started: Outcome | None = None  # why ``start`` found no child, for the batch it was for

    def start(self) -> None:
        """Have a child ready for the next batch. A failure to get one is that batch's outcome: ``perform``
        does not try again, which would wait for an interpreter after the lease check."""
        self._not_started = None  # a batch that never came (its lease was refused): this one tries afresh
        ready = self._ready()
        if isinstance(ready, Outcome):
            self._not_started = ready

    def perform(self, batch: Mapping[str, list[Any]], context: dict[str, Any],
                stop_requested: Callable[[], None] | None = None) -> Outcome:
        """Run one batch in the child (taken first if need be) and wait for its outcome. While it runs,
        ``stop_requested`` is called every ``STOP_POLL`` seconds: a StopRequested it raises kills the child."""
        w = self.worker
        not_started, self._not_started = self._not_started, None
        child = not_started or self._ready()
        if isinstance(child, Outcome):
            return child
        self.last_pid = child.pid
        limit: float | None = w.time_limit
        try:
            child.send(("perform", dict(batch), context))
            reply = child.receive(None if limit is None else limit + w.time_limit_grace,
                                  tick=STOP_POLL, on_tick=stop_requested)
        except TimeoutError:
            code = child.kill()
            self.child = None
            return self._timed_out(child, code)
        except StopRequested as exc:
            code = child.kill()
            self.child = None
            log.warning("%s: child process %d killed (%s): its perform was stopped by %s; the next batch takes "
                        "a spare child", self.name, child.pid, how(code), exc.args[0] if exc.args else "an operator")
            return Outcome("stopped", f"the perform was stopped by {exc.args[0] if exc.args else 'an operator'}: "
                                      f"its child process was killed")
        except (ChildDied, OSError):
            code = child.kill()  # dead already: its group killed, then it is reaped
            self.child = None
            if _exiting.is_set():
                return _abandoned(child.pid)
            if limit is not None and code == -signal.SIGALRM:
                return self._timed_out(child, code)
            return Outcome("crashed", f"the child process performing the batch died ({how(code)})")
        kind, rss_mib = reply[0], reply[-1]
        if kind == "expired":
            return Outcome(kind, "the lease's deadline had passed when the batch reached the child process")
        child.batches += 1
        if kind == "partial":
            outcome = Outcome(kind, failures=reply[1])
        elif kind == "ok":
            outcome = Outcome(kind)
        else:  # "error", "stop": message, traceback, class name
            outcome = Outcome(kind, reply[1], reply[2], error_class=reply[3])
        self._recycle(child, rss_mib)
        return outcome

    def _timed_out(self, child: Child, code: int) -> Outcome:
        w = self.worker
        if code == -signal.SIGALRM:
            # Its own deadline came first: this server did not kill it at the limit (it was paused, or late).
            log.error("%s: child %d ended itself %.1f s past its time_limit of %s s; a spare child takes the "
                      "next batch", self.name, child.pid, w.time_limit_grace, w.time_limit)
        else:
            log.error("%s: child %d killed (%s) %.1f s past its time_limit of %s s; a spare child takes the next "
                      "batch", self.name, child.pid, how(code), w.time_limit_grace, w.time_limit)
        return Outcome("timeout", f"the perform ran past its time_limit of {w.time_limit} s and its "
                                  f"time_limit_grace of {w.time_limit_grace} s: its child process was killed")

    def _ready(self) -> Child | Outcome:
        if _exiting.is_set():
            return _abandoned(None)
        if self.child is not None:
            if not self.child.exited():
                return self.child
            # It died between batches (an OOM kill): no batch was in it. Its group goes, a spare takes over.
            code = self.child.kill()
            log.warning("%s: child process %d ended between batches (%s); a spare child takes the next batch",
                        self.name, self.child.pid, how(code))
            self.child = None
        try:
            got = spares.take(self.worker, app_path(self.worker), self.spawn_timeout)
        except WorkerCrashed as exc:
            return Outcome("crashed", f"could not start a child process: {exc}")
        if isinstance(got, str):
            return Outcome("crashed", got)
        self.child = got
        # After publishing it: kill_all_children either sees this child or was called before this check.
        if _exiting.is_set():
            self.child = None
            got.kill()
            return _abandoned(got.pid)
        return got

    def _recycle(self, child: Child, rss_mib: float) -> None:
        w = self.worker
        reason = None
        if w.max_batches_per_child is not None and child.batches >= w.max_batches_per_child:
            reason = f"{child.batches} batches (max_batches_per_child)"
        elif w.max_memory_per_child is not None and rss_mib > w.max_memory_per_child:
            reason = f"{rss_mib:.0f} MiB resident (max_memory_per_child {w.max_memory_per_child})"
        if reason is not None:
            log.info("%s: child process %d replaced by a spare after %s", self.name, child.pid, reason)
            self.child = None
            spares.SPARES.retire(child)  # it exits in the background: the next batch takes a spare at once

    def close(self, timeout: float = 5.0) -> None:
        """The server thread stops: its child exits (killed after ``timeout``)."""
        if self.child is not None:
            self.child.stop(timeout)
            self.child = None

    def kill(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None


_slots: dict[tuple[int, str], ChildSlot] = {}
_slots_lock = threading.Lock()


def slot_for(worker: type[Any]) -> ChildSlot:
    """The calling server thread's child slot for ``worker``."""
    key = (threading.get_ident(), worker.__name__)
    with _slots_lock:
        slot = _slots.get(key)
        if slot is None:
            slot = _slots[key] = ChildSlot(worker)
        return slot


def close_thread_children(timeout: float = 5.0) -> None:
    """The calling server thread stops: stop its children. The last thread to stop stops the spares too."""
    ident = threading.get_ident()
    with _slots_lock:
        mine = [key for key in _slots if key[0] == ident]
        slots = [_slots.pop(key) for key in mine]
        last = not _slots
    for slot in slots:
        slot.close(timeout)
    if last:
        spares.SPARES.close()


# Set once the server exits without waiting for the performs still running: a child that dies from
# then on was killed by its server, not crashed, and no new child starts.
_exiting = threading.Event()


def _abandoned(pid: int | None) -> Outcome:
    return Outcome("abandoned", "the server is exiting without waiting for this perform" +
                   (f": its child process {pid} was killed and reaped" if pid is not None else ""))


def serving() -> None:
    """A server starts in this process (an embedded one may follow another that exited): children may start."""
    _exiting.clear()
    spares.SPARES.serving()


def kill_all_children() -> list[int]:
    """The server exits without waiting for the performs still running (a second signal, or past
    ``shutdown_timeout``): SIGKILL every child (and its process group) and reap it. Returns their pids.

    When this returns no child of this process runs any more, so the batches they performed can go
    back to the queue at once (their threads answer "abandoned", write no outcome, and hand their
    shards back, which restores those batches) rather than when their leases expire.
    """
    _exiting.set()
    with _slots_lock:
        slots = list(_slots.values())
    killed = []
    for slot in slots:
        child = slot.child
        if child is not None and child.process.returncode is None:
            code = child.kill_for_exit()
            killed.append(child.pid)
            log.warning("%s: child process %d killed (%s) as the server exits", slot.name, child.pid, how(code))
    spares.SPARES.kill_all()  # idle and starting ones: no batch in them, nothing to say
    return killed
