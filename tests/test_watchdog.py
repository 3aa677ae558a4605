"""The thread-isolation watchdog (lowkiq.server.isolation.Watchdog) in its own process: a limit that passes
raises TimeLimitExceeded in its thread, and performs that end in time cost neither memory nor wake-ups."""

from __future__ import annotations

import threading
import time

import pytest

from lowkiq.errors import TimeLimitExceeded
from lowkiq.server.isolation import Watchdog


def test_limits_armed_and_disarmed_in_time_neither_pile_up_nor_wake_the_watchdog(monkeypatch):
    watchdog = Watchdog()
    wakes = []
    original = threading.Condition.notify

    def counting(self, n=1):
        if self is watchdog._changed:
            wakes.append(1)
        original(self, n)

    monkeypatch.setattr(threading.Condition, "notify", counting)
    for _ in range(10_000):  # a thread's batches, each under a 30 s limit, each done in time
        watchdog.disarm(watchdog.arm(30, "test"))
    # the watchdog looks at the heap before it sleeps, and each later deadline comes after the one it sleeps until
    assert len(wakes) <= 1
    # disarmed limits are dropped now and then, not kept until their deadlines
    assert len(watchdog._heap) <= 2 * 1 + 65


def test_a_limit_that_passes_raises_in_its_thread_even_after_many_disarmed_ones():
    watchdog = Watchdog()
    for _ in range(1000):
        watchdog.disarm(watchdog.arm(30, "test"))
    raised = []

    def perform():
        armed = watchdog.arm(0.2, "test")
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # pure Python: the exception lands between bytecodes
                pass
        except TimeLimitExceeded:
            raised.append(time.monotonic())
        finally:
            watchdog.disarm(armed)

    started = time.monotonic()
    thread = threading.Thread(target=perform)
    thread.start()
    thread.join(10)
    assert raised and raised[0] - started == pytest.approx(0.2, abs=1.5)
