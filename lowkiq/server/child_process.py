"""One child process of process isolation (``Worker.isolation = "process"``): how it is spawned, spoken to,
watched and killed.

A child runs in a session (and process group) of its own, so killing it kills everything its performs
started (``os.killpg``): a subprocess that ignores SIGTERM, or one that holds the child's reply pipe
open, never outlives it. Its death is seen by its pid (a pidfd where the kernel has one, else a
``waitid`` that leaves it unreaped, polled), never only by EOF on its pipe, which a grandchild holding
the pipe's write end would delay forever; its group is killed before it is reaped, so the group's id
cannot meanwhile pass to another process. Pipes are read without blocking for the same reason: a child
that died in the middle of a reply leaves a partial message, not a hung reader.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("lowkiq.server")

HEADER = struct.Struct(">I")
# Without a pidfd: how often a thread waiting on a child asks the kernel whether it exited.
DEATH_POLL = 0.05
# Seconds a kill waits for every process of the child's group to be gone (each has SIGKILL pending).
GROUP_EXIT_WAIT = 2.0
_NOTHING = object()


class ChildDied(EOFError):
    """The child exited (seen by its pid, or by EOF on its pipe) before a whole reply came."""


class Child:
    """One live child process, its two pipes and, where the kernel has them, a pidfd."""

    def __init__(self, worker_name: str, app: str) -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        argv = [sys.executable, "-m", "lowkiq.server.child", app, worker_name, str(os.getpid()),
                str(to_child_r), str(from_child_w)]
        try:
            # start_new_session: its own process group (killed whole) and no controlling terminal (a
            # terminal's Ctrl-C is for the server, which stops its children itself).
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(to_child_r, from_child_w),
                                            close_fds=True, start_new_session=True)
        except BaseException:
            os.close(self.to_child)
            os.close(self.from_child)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.pid = self.process.pid
        self.worker_name = worker_name
        os.set_blocking(self.from_child, False)
        os.set_blocking(self.to_child, False)
        self._pidfd = _pidfd(self.pid)
        # Kept for the child's life: a selector per wait would cost three system calls more per batch.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.from_child, selectors.EVENT_READ)
        if self._pidfd is not None:
            self._selector.register(self._pidfd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self._eof = False
        self.batches = 0

    # -- talking to it ---------------------------------------------------------------------------------

    def send(self, message: Any) -> None:
        """Write a whole message; ChildDied when the child is gone (a grandchild may hold the pipe's read end,
        so a full pipe is no proof of life: the pid is watched meanwhile)."""
        body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(HEADER.pack(len(body)) + body)
        while view:
            try:
                view = view[os.write(self.to_child, view):]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise ChildDied(str(exc)) from None
            if self.exited():
                raise ChildDied("the child process exited")
            with selectors.DefaultSelector() as selector:
                selector.register(self.to_child, selectors.EVENT_WRITE)
                if self._pidfd is not None:
                    selector.register(self._pidfd, selectors.EVENT_READ)
                selector.select(DEATH_POLL if self._pidfd is None else None)

    def receive(self, timeout: float | None, *, tick: float | None = None,
                on_tick: Callable[[], None] | None = None) -> Any:
        """The child's next message. TimeoutError when none came within ``timeout``; ChildDied when the
        child exited first. ``on_tick`` runs every ``tick`` seconds of waiting; what it raises ends the wait."""
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        next_tick = None if on_tick is None or tick is None else now + tick
        while True:
            message = self._message()
            if message is not _NOTHING:
                return message
            if self._eof:
                raise ChildDied("the child process closed its pipe")
            waits = [t - now for t in (deadline, next_tick) if t is not None]
            if self._pidfd is None:
                waits.append(DEATH_POLL)
            ready = {key.fd for key, _ in self._selector.select(max(0.0, min(waits)) if waits else None)}
            if self.from_child in ready and self._fill():
                continue  # (part of) a reply: read before anything else
            if (self._pidfd is None or self._pidfd in ready) and self.exited():
                while self._fill():  # what it wrote before it died
                    pass
                message = self._message()
                if message is not _NOTHING:
                    return message
                raise ChildDied("the child process exited")
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise TimeoutError
            if next_tick is not None and now >= next_tick:
                assert on_tick is not None
                on_tick()
                next_tick = now + (tick or 0.0)

    def _fill(self) -> bool:
        """One read of what the pipe holds; whether it gave anything (bytes, or the end)."""
        if self._eof:
            return False
        try:
            chunk = os.read(self.from_child, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:  # closed by a thread killing it for the server's exit
            self._eof = True
            return True
        if not chunk:
            self._eof = True
            return True
        self._buffer += chunk
        return True

    def _message(self) -> Any:
        if len(self._buffer) < HEADER.size:
            return _NOTHING
        size = HEADER.unpack_from(self._buffer)[0]
        end = HEADER.size + size
        if len(self._buffer) < end:
            return _NOTHING
        body = bytes(self._buffer[HEADER.size:end])
        del self._buffer[:end]
        return pickle.loads(body)

    # -- its end -----------------------------------------------------------------------------------------

    def exited(self) -> bool:
        """Whether the child has exited, without reaping it (its process group id stays its own until then)."""
        if self.process.returncode is not None:
            return True
        if hasattr(os, "waitid"):
            try:
                return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:  # reaped meanwhile by a thread killing it
                return True
        return self.process.poll() is not None

    def kill_group(self) -> None:
        """SIGKILL the child and every process of its group: nothing its performs started runs on. A
        process that made a session of its own (``setsid``) left the group, and is not reached."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)

    def kill_for_exit(self) -> int:
        """SIGKILL and reap, from the stopping server's main thread. The pipes stay open: the thread that
        owns this child is reading them, and closes them itself once it sees the child's end."""
        self.kill_group()
        return self.process.wait()  # Popen serializes waits: the owner's own wait returns the same code

    def kill(self) -> int:
        """SIGKILL its group, then reap: when this returns, the child and every thread of it are gone, and so
        is every other process of its group (up to ``GROUP_EXIT_WAIT``: a process stuck in the kernel, in
        uninterruptible I/O, ends when that returns; it is logged)."""
        self.kill_group()
        code = self.process.wait()
        self.close()
        left = _wait_for_group(self.pid, time.monotonic() + GROUP_EXIT_WAIT)
        if left:
            log.warning("%s: processes %s of child process %d's group still exit %.0f s after SIGKILL (stuck in the "
                        "kernel)", self.worker_name, left, self.pid, GROUP_EXIT_WAIT)
        return code

    def request_exit(self) -> None:
        """EOF on its requests: it exits after its current batch."""
        if self.to_child >= 0:
            with contextlib.suppress(OSError):
                os.close(self.to_child)
            self.to_child = -1

    def stop(self, timeout: float) -> int:
        """Ask the child to exit after its current batch; killed if it does not within ``timeout``. What its
        performs left running in its group is killed when it has exited."""
        self.request_exit()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)
        return self.kill()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._selector.close()
        for name in ("to_child", "from_child", "_pidfd"):
            fd = getattr(self, name)
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
            setattr(self, name, -1 if name != "_pidfd" else None)
        self._eof = True

    def fileno(self) -> int:
        """What a selector watches to learn of a reply (or of the child's end, with no pidfd)."""
        return self.from_child

    @property
    def pidfd(self) -> int | None:
        return self._pidfd


def _wait_for_group(pgid: int, deadline: float) -> list[int]:
    """Wait until no process of group ``pgid`` runs (a zombie does not: it runs no code), or ``deadline``;
    the pids still running then. SIGKILL is pending for each already, but a big process takes a few
    milliseconds to tear down after it."""
    while True:
        left = _group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.005)


def _group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies: read from /proc where there is one, else any
    member (``killpg`` with signal 0, which counts a zombie too)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = None
    if entries is None or not os.path.exists("/proc/self/stat"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry))
    return members


def _pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (Linux 5.3+): readable once the process exits, so a wait wakes at its death."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:  # an older kernel, or a sandbox that forbids it: waitid, polled, does instead
        return None
    return fd


def how(code: int) -> str:
    """How a child ended, for people: ``signal SIGKILL`` or ``exit code 3``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
