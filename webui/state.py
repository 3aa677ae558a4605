"""Per-app state of the console, kept in ``app.extensions["lowkiq"]``, never on a module global.

One process may serve several Flask apps (tests do), each with its own
console, options and chart samples.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from flask import Flask, current_app

from .console import Console

EXTENSION = "lowkiq"
# Chart: one sample per poll at most this often, and this many kept.
SAMPLE_EVERY = 1.5
SAMPLES_KEPT = 60


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    processed: int
    failed: int


@dataclass
class WebState:
    # None: follow lowkiq.current() (a host app that configured lowkiq).
    console_factory: Callable[[], Console] | None = None
    readonly: bool = False
    # Seconds between live refreshes of the dashboard.
    poll_interval: float = 3.0
    secret_key: bytes | None = None
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=SAMPLES_KEPT))
    _console: Console | None = None
    _runtime_id: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def console(self) -> Console:
        if self.console_factory is not None:
            if self._console is None:
                with self._lock:
                    if self._console is None:
                        self._console = self.console_factory()
            return self._console
        from .. import runtime

        current = runtime.current()
        # lowkiq.configure() may be called again (tests, reloads): follow it.
        if self._console is None or self._runtime_id != id(current):
            with self._lock:
                self._console = Console.from_runtime(current)
                self._runtime_id = id(current)
        return self._console

    def sample(self, at: float, processed: int, failed: int) -> list[Sample]:
        """Record totals (at most every SAMPLE_EVERY s) and return the samples so far."""
        with self._lock:
            if not self.samples or at - self.samples[-1].at >= SAMPLE_EVERY:
                self.samples.append(Sample(at, processed, failed))
            return list(self.samples)


def init_app(app: Flask) -> WebState:
    """The state of ``app``, created from ``app.config`` on first use."""
    state = app.extensions.get(EXTENSION)
    if state is None:
        state = WebState(
            readonly=bool(app.config.get("LOWKIQ_WEB_READONLY", False)),
            poll_interval=float(app.config.get("LOWKIQ_WEB_POLL_INTERVAL", 3.0)),
        )
        app.extensions[EXTENSION] = state
    return state


def state() -> WebState:
    return init_app(current_app)


def console() -> Console:
    return state().console()
