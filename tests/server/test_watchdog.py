"""The thread-isolation watchdog (lowkiq.server.process_isolation.Watchdog) in its own process: a limit that passes
raises TimeLimitExceeded in its thread, and performs that end in time cost neither memory nor wake-ups."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from lowkiq.errors import TimeLimitExceeded
from lowkiq.server.process_isolation import LINE_WINDOW, LineRaiser, Watchdog


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


def line_events_on() -> bool:
    """Whether the watchdog's sys.monitoring LINE events are on (Python 3.13+; never before)."""
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(tool) == LineRaiser.TOOL_NAME and monitoring.get_events(tool)
                                          for tool in range(6))


def test_a_thread_blocked_in_c_past_its_limit_gets_it_when_the_call_returns_and_line_events_go_off():
    """On 3.13 the exception waits for the thread's next line, with every thread's lines watched meanwhile: not for
    longer than LINE_WINDOW. A thread still blocked then gets it as before, when the call returns, inside its try."""
    watchdog = Watchdog()
    seen = []

    def perform(seconds):
        armed = watchdog.arm(0.1, "test")
        try:
            try:
                time.sleep(seconds)  # one blocking call in C, past the limit
                seen.append("returned")
            except TimeLimitExceeded:
                seen.append("except")
            finally:
                seen.append("finally")
        finally:
            watchdog.disarm(armed)

    thread = threading.Thread(target=perform, args=(LINE_WINDOW + 0.6,))
    thread.start()
    time.sleep(0.1 + LINE_WINDOW + 0.3)  # past the window, the call still blocked
    watched_while_blocked = line_events_on()
    thread.join(5)
    assert seen == ["except", "finally"]
    assert not watched_while_blocked
    # A pure-Python perform: the exception lands at once, and the events go off with it.
    seen.clear()
    started = time.monotonic()

    def busy():
        armed = watchdog.arm(0.1, "test")
        try:
            try:
                while time.monotonic() < started + 5:
                    pass
            except TimeLimitExceeded:
                seen.append("except")
            finally:
                seen.append("finally")
        finally:
            watchdog.disarm(armed)

    thread = threading.Thread(target=busy)
    thread.start()
    thread.join(5)
    assert seen == ["except", "finally"] and time.monotonic() - started < 2
    assert not line_events_on()
