"""Spare children of process isolation: a child warmed before it is needed, so that a shard whose child was
killed at its limit, crashed or was recycled performs its next batch at once, not after a new
interpreter's start-up (seconds, for an app with heavy imports).

One pool per server process, with at most ``KEEP`` idle spares per process-isolated worker. Per process and
not per server thread: any thread may come to serve any shard, and a spare per thread would keep
``threads_per_node`` idle interpreters per worker for what is a rare event; two kills at the same moment
cost the second one the wait for the spare that started warming at the first.

Every child is spawned here, by one long-lived thread (``lowkiq-children``), and handed to the server
thread that takes it: Linux sends a child its ``PR_SET_PDEATHSIG`` when the *thread* that spawned it ends,
so the spawning thread must outlive every child. The thread also lets retired children (recycled,
``max_batches_per_child`` / ``max_memory_per_child``) exit in the background, killing what is left of
their process groups, so that a recycle never holds up a shard.

A spare is started when the first child of a worker is needed in this process (after that first one,
which its thread waits for), and again each time a spare is taken. A start that fails (the app does not
load) is the outcome of the batch that waited for it; no idle spare is started again until the next take,
so a broken app costs one start per batch, as without spares, not a loop of starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .child_process import DEATH_POLL, Child, ChildDied, how

log = logging.getLogger("lowkiq.server")

KEEP = 1  # idle spares per process-isolated worker and server process
RETIRE_TIMEOUT = 5.0  # seconds a retired child has to finish and exit before it is killed


@dataclass(eq=False)
class _Pool:
    """One worker's children of this process that no server thread holds: ready, and starting."""

    worker_name: str
    app: str
    ready: list[Child] = field(default_factory=list)
    starting: dict[Child, float] = field(default_factory=dict)  # -> the monotonic time it must be ready by
    waiters: int = 0  # threads waiting in take()
    refill: bool = True  # keep an idle spare (off after a failed start, until the next take)
    failures: deque[str] = field(default_factory=deque)  # why starts failed, one for each waiter

    def wanted(self) -> int:
        """How many children should be ready or starting: one per waiting thread (a spare comes after, so
        that it does not slow their start on a busy machine), else the idle spare."""
        if self.waiters:
            return self.waiters
        return KEEP if self.refill else 0


class Spares:
    def __init__(self, spawn_timeout: float = 60.0) -> None:
        self.spawn_timeout = spawn_timeout
        self._changed = threading.Condition()
        self._pools: dict[tuple[str, str], _Pool] = {}
        self._retiring: dict[Child, float] = {}  # -> when it is killed if it has not exited
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._stopped = False  # the server exits: nothing starts, and what is held is killed

    def take(self, worker_name: str, app: str, timeout: float) -> Child | str:
        """A ready child for ``worker_name`` (the spare, else the next to start), or why none could be had."""
        deadline = time.monotonic() + timeout
        with self._changed:
            pool = self._pools.get((app, worker_name))
            if pool is None:
                pool = self._pools[(app, worker_name)] = _Pool(worker_name, app)
            pool.refill = True
            pool.waiters += 1
            self._ensure_thread()
            try:
                while True:
                    while pool.ready:
                        child = pool.ready.pop(0)
                        if child.exited():  # died while idle (an OOM kill): reaped by the thread
                            self._retiring[child] = 0.0
                            continue
                        return child
                    if pool.failures:
                        return pool.failures.popleft()
                    if self._stopped:
                        return "the server is exiting"
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return f"no child process was ready within {timeout:g} s"
                    self._wake()
                    self._changed.wait(left)
            finally:
                pool.waiters -= 1
                self._wake()  # the spare that replaces what was taken, or fewer to start

    def retire(self, child: Child) -> None:
        """The child exits after its current batch, in the background; killed after ``RETIRE_TIMEOUT``."""
        child.request_exit()
        with self._changed:
            self._retiring[child] = time.monotonic() + RETIRE_TIMEOUT
            self._ensure_thread()
            self._wake()

    def close(self) -> None:
        """No server thread performs in a child any more: the idle spares exit (killed if they do not within
        ``RETIRE_TIMEOUT``), those starting are killed. Spares start again at the next take."""
        if self._thread is None:
            return
        with self._changed:
            pools = list(self._pools.values())
            starting = [child for pool in pools for child in pool.starting]
            ready = [child for pool in pools for child in pool.ready]
            for pool in pools:
                pool.starting.clear()
                pool.ready.clear()
                pool.refill = False
            # A thread still waiting in take() keeps its pool, and gets a child started for it.
            self._pools = {key: pool for key, pool in self._pools.items() if pool.waiters}
            self._wake()
        for child in starting:
            child.kill()
        for child in ready:
            child.stop(RETIRE_TIMEOUT)

    def kill_all(self) -> list[int]:
        """The server exits without waiting: SIGKILL and reap every child held here. Their pids."""
        with self._changed:
            self._stopped = True
            children = [c for pool in self._pools.values() for c in (*pool.ready, *pool.starting)]
            children += list(self._retiring)
            for pool in self._pools.values():
                pool.starting.clear()
                pool.ready.clear()
            self._pools.clear()
            self._retiring.clear()
            self._changed.notify_all()
        for child in children:
            child.kill()
        return [child.pid for child in children]

    def serving(self) -> None:
        """A server starts in this process (an embedded one may follow another that exited)."""
        with self._changed:
            self._stopped = False

    # -- the thread --------------------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            # Never ends (a daemon): the children it spawned would be killed with it (PR_SET_PDEATHSIG).
            self._thread = threading.Thread(target=self._run, name="lowkiq-children", daemon=True)
            self._thread.start()

    def _wake(self) -> None:
        if self._wake_w >= 0:
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_w, b"\0")

    def _run(self) -> None:
        while True:
            try:
                self._start_wanted()
                self._wait()
                self._check_starting()
                self._check_retiring()
            except Exception:  # a bug here must not leave every later take waiting for nothing
                log.exception("process isolation: the thread starting child processes failed; retrying")
                time.sleep(1.0)

    def _start_wanted(self) -> None:
        with self._changed:
            if self._stopped:
                return
            wanted: list[_Pool] = []
            for pool in self._pools.values():
                wanted += [pool] * (pool.wanted() - len(pool.ready) - len(pool.starting))
                while len(pool.ready) > max(pool.waiters, KEEP):  # more than the idle spare: left by a waiter
                    self._retiring[pool.ready.pop()] = time.monotonic() + RETIRE_TIMEOUT
        for pool in wanted:
            try:
                child = Child(pool.worker_name, pool.app)
            except OSError as exc:
                self._failed(pool, f"could not start a child process: {exc}")
                continue
            with self._changed:
                if self._stopped:
                    child.kill()
                else:
                    pool.starting[child] = time.monotonic() + self.spawn_timeout

    def _wait(self) -> None:
        """Until a starting child answers or ends, a retired one exits, a deadline passes, or a take wakes us."""
        with self._changed:
            starting = [c for pool in self._pools.values() for c in pool.starting]
            deadlines = [d for pool in self._pools.values() for d in pool.starting.values()]
            retiring = list(self._retiring)
            deadlines += list(self._retiring.values())
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            polled = False
            for child in starting + retiring:
                fds = [child.pidfd] if child in retiring else [child.fileno(), child.pidfd]
                for fd in fds:
                    if fd is not None and fd >= 0:
                        with contextlib.suppress(KeyError, ValueError):
                            selector.register(fd, selectors.EVENT_READ)
                polled |= child.pidfd is None
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            if polled:
                timeout = DEATH_POLL if timeout is None else min(timeout, DEATH_POLL)
            selector.select(timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass

    def _check_starting(self) -> None:
        now = time.monotonic()
        with self._changed:
            starting = [(pool, child, deadline) for pool in self._pools.values()
                        for child, deadline in pool.starting.items()]
        for pool, child, deadline in starting:
            try:
                hello = child.receive(0)
            except TimeoutError:
                if now < deadline:
                    continue
                code = child.kill()
                self._failed(pool, f"the child process did not start within {self.spawn_timeout:g} s ({how(code)})",
                             child)
                continue
            except (ChildDied, OSError):
                code = child.kill()
                self._failed(pool, f"the child process did not start ({how(code)})", child)
                continue
            if hello[0] != "ready":
                child.kill()
                self._failed(pool, f"the child process could not load the app: {hello[1]}", child)
                continue
            with self._changed:
                if pool.starting.pop(child, None) is None:  # killed meanwhile: the server exits
                    continue
                pool.ready.append(child)
                self._changed.notify_all()
            log.info("%s: child process %d ready", pool.worker_name, child.pid)

    def _failed(self, pool: _Pool, why: str, child: Child | None = None) -> None:
        with self._changed:
            if child is not None and pool.starting.pop(child, None) is None:
                return  # killed by close() or kill_all() meanwhile: not a failure to start
            log.error("%s: %s", pool.worker_name, why)
            if pool.waiters > len(pool.failures):
                pool.failures.append(why)
            pool.refill = False  # no idle spare until a take asks again: a broken app is not started in a loop
            self._changed.notify_all()

    def _check_retiring(self) -> None:
        now = time.monotonic()
        with self._changed:
            retiring = list(self._retiring.items())
        for child, deadline in retiring:
            if child.exited() or now >= deadline:
                if not child.exited():
                    log.warning("%s: child process %d did not exit within %.0f s of its retirement: killed",
                                child.worker_name, child.pid, RETIRE_TIMEOUT)
                child.kill()  # what its performs left in its group goes with it
                with self._changed:
                    self._retiring.pop(child, None)


SPARES = Spares()


def take(worker: type[Any], app: str, timeout: float) -> Child | str:
    return SPARES.take(worker.__name__, app, timeout)
