"""Per-app state of the console, kept in ``app.extensions["lowkiq"]``, never on a module global.

One process may serve several Flask apps (tests do), each with its own
console. Settings are not kept here: they are read from
``app.config`` on every request (``settings()``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from flask import Flask, current_app, g

from ..console import Console
from .settings import ConsoleSettings, from_config

EXTENSION = "lowkiq"


@dataclass
class WebState:
    # None: follow lowkiq.current() (a host app that configured lowkiq).
    console_factory: Callable[[], Console] | None = None
    # The key CSRF tokens are signed with when none is configured, read once from Redis.
    stored_secret_key: bytes | None = None
    # The standalone app logs once that it serves without a password on a public address.
    warned_no_auth: bool = False
    # The wall-clock minute this process last recorded the queues' history for; False once Redis refused it.
    history_minute: int = -1
    history_allowed: bool = True
    _console: Console | None = None
    _console_of: tuple[int, float] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def console(self, redis_timeout: float) -> Console:
        if self.console_factory is not None:
            if self._console is None:
                with self._lock:
                    if self._console is None:
                        self._console = self.console_factory()
            return self._console
        from .. import runtime

        current = runtime.current()
        # lowkiq.configure() may be called again (tests, reloads), the timeout changed: follow them.
        built_for = (id(current), redis_timeout)
        if self._console is None or self._console_of != built_for:
            with self._lock:
                if self._console is None or self._console_of != built_for:
                    if self._console is not None:
                        self._console.client.close()  # its own connections: the new one opens others
                    self._console = Console.from_runtime(current, redis_timeout=redis_timeout)
                    self._console_of = built_for
        return self._console


def init_app(app: Flask) -> WebState:
    """The state of ``app``, created on first use."""
    state = app.extensions.get(EXTENSION)
    if state is None:
        state = WebState()
        app.extensions[EXTENSION] = state
    return state


def state() -> WebState:
    return init_app(current_app)


def settings() -> ConsoleSettings:
    """The console's settings as the app's config says now: a host app may set them after mounting."""
    found = g.get("lowkiq_settings")
    if found is None:
        found = g.lowkiq_settings = from_config(current_app.config)
    return found  # type: ignore[no-any-return]


def console() -> Console:
    return state().console(settings().redis_timeout)
