"""Middlewares wrap enqueueing (client) and ``perform`` (server).

A middleware is ``def mw(worker, batch, call_next): ...; return call_next()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Middleware = Callable[[Any, Any, Callable[[], Any]], Any]


def run_chain(middlewares: Sequence[Middleware], worker: Any, batch: Any, innermost: Callable[[], Any]) -> Any:
    """Call ``innermost`` inside every middleware, the first one outermost."""

    def step(i: int) -> Any:
        if i == len(middlewares):
            return innermost()
        return middlewares[i](worker, batch, lambda: step(i + 1))

    return step(0)
