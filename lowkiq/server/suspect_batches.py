"""A batch that was in flight when a server died runs alone in its process.

When a process dies, every job it had in flight counts one crash, and a job
that reaches ``crash_limit`` goes to the morgue (``acquire.lua``). A job that
kills its server is usually in flight beside innocent neighbours on the other
threads; if the batches restored after the crash ran side by side again, the
neighbours would be charged every crash and reach the morgue with the culprit.

So a suspect batch (one holding a job with a crash count) is performed only
when no other thread of the process has a batch in processing: the suspect's
thread claims the process, the others acknowledge what they finished and wait
before taking more, and the claim ends when the suspect's perform returns. A
second suspect taken meanwhile on another thread goes back to its queue (the
same place: its thread holds the shard) and is taken again after the claim.
A crash then charges only the jobs of the suspect batch.

The other threads wait a bounded time, the claim's ``bound``: the suspect worker's
``time_limit`` (plus ``time_limit_grace`` under process isolation), else ``suspect_wait``.
Then they go on beside the suspect batch, which runs on: a suspect that never returns
(or a perform elsewhere that never lets go) stalls its own shard only.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class SuspectBatches:
    def __init__(self, suspect_wait: float = 30.0, clock: Callable[[], float] = time.monotonic, *,
                 waits: bool = True) -> None:
        self._changed = threading.Condition()
        self._holding = 0  # threads with a batch taken and not yet acknowledged
        self._owner: str | None = None  # the thread performing a suspect batch alone
        self._until = math.inf  # (monotonic) when the other threads stop waiting for the owner
        self._suspect: dict[str, object] | None = None  # what the owner performs: worker, ids, since (unix time)
        self.suspect_wait = suspect_wait
        self.clock = clock
        # False: hold() refuses at once instead of waiting out a claim. The async executor's slots share a few
        # threads: one waiting there would keep the others from the steps that let the claim go ahead.
        self.waits = waits

    def _waits_for(self, thread: str) -> bool:
        return self._owner is not None and self._owner != thread and self.clock() < self._until

    def waiting_on(self) -> dict[str, object] | None:
        """What the other threads wait for now (a suspect batch: its worker, ids, thread, since, and the
        seconds they wait for it at most), or None."""
        owner, until, suspect = self._owner, self._until, self._suspect
        if owner is None or suspect is None or self.clock() >= until:
            return None
        return {**suspect, "thread": owner, "for_at_most": round(until - self.clock(), 3)}

    def claimed_by_other(self, thread: str) -> bool:
        # a read without the lock: a stale answer is settled in hold()
        return self._waits_for(thread)

    def hold(self, thread: str, stop: threading.Event) -> bool:
        """Before a take: count this thread as holding a batch. Waits out another thread's claim (at most
        its bound); False when the process is stopping meanwhile, or at once while claimed without ``waits``."""
        with self._changed:
            while self._waits_for(thread):
                if stop.is_set() or not self.waits:
                    return False
                self._changed.wait(min(0.5, max(0.001, self._until - self.clock())))
            self._holding += 1
            return True

    def let_go(self) -> None:
        """This thread's batches are acknowledged (or were never taken)."""
        with self._changed:
            self._holding -= 1
            self._changed.notify_all()

    def claim(self, thread: str, stop: threading.Event, bound: float | None = None,
              what: dict[str, object] | None = None) -> bool:
        """A suspect batch is in hand (held): wait until no other thread holds one, at most ``bound`` seconds
        (default ``suspect_wait``), which is also how long the others wait for it. False when another thread
        has the claim (give the batch back) or the process is stopping."""
        with self._changed:
            if self._owner is not None and self._owner != thread:
                return False
            self._owner = thread
            self._until = self.clock() + (self.suspect_wait if bound is None else bound)
            self._suspect = {**(what or {}), "since": time.time()}
            self._changed.notify_all()
            while self._holding > 1 and self.clock() < self._until:
                if stop.is_set():
                    self._owner = None
                    self._until = math.inf
                    self._changed.notify_all()
                    return False
                self._changed.wait(min(0.5, max(0.001, self._until - self.clock())))
            return True

    def release(self, thread: str) -> None:
        with self._changed:
            if self._owner == thread:
                self._owner = None
                self._until = math.inf
                self._suspect = None
                self._changed.notify_all()

    def wait_turn(self, thread: str, stop: threading.Event) -> None:
        """Not holding anything: wait while another thread performs a suspect batch (at most its bound)."""
        with self._changed:
            while self._waits_for(thread) and not stop.is_set():
                self._changed.wait(min(0.5, max(0.001, self._until - self.clock())))
