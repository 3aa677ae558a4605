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
"""

from __future__ import annotations

import threading


class CrashIsolation:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holding = 0  # threads with a batch taken and not yet acknowledged
        self._owner: str | None = None  # the thread performing a suspect batch alone

    def claimed_by_other(self, thread: str) -> bool:
        owner = self._owner  # a read without the lock: a stale answer is settled in hold()
        return owner is not None and owner != thread

    def hold(self, thread: str, stop: threading.Event) -> bool:
        """Before a take: count this thread as holding a batch. Waits out another thread's claim;
        False when the process is stopping meanwhile."""
        with self._changed:
            while self._owner is not None and self._owner != thread:
                if stop.is_set():
                    return False
                self._changed.wait(0.5)
            self._holding += 1
            return True

    def let_go(self) -> None:
        """This thread's batches are acknowledged (or were never taken)."""
        with self._changed:
            self._holding -= 1
            self._changed.notify_all()

    def claim(self, thread: str, stop: threading.Event) -> bool:
        """A suspect batch is in hand (held): wait until no other thread holds one. False when
        another thread has the claim (give the batch back) or the process is stopping."""
        with self._changed:
            if self._owner is not None and self._owner != thread:
                return False
            self._owner = thread
            self._changed.notify_all()
            while self._holding > 1:
                if stop.is_set():
                    self._owner = None
                    self._changed.notify_all()
                    return False
                self._changed.wait(0.5)
            return True

    def release(self, thread: str) -> None:
        with self._changed:
            if self._owner == thread:
                self._owner = None
                self._changed.notify_all()

    def wait_turn(self, thread: str, stop: threading.Event) -> None:
        """Not holding anything: wait while another thread performs a suspect batch."""
        with self._changed:
            while self._owner is not None and self._owner != thread and not stop.is_set():
                self._changed.wait(0.5)
