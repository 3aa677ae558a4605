"""Middlewares wrap enqueueing (client) and ``perform`` (server).

A middleware is ``def mw(worker, batch, call_next): ...; return call_next()``. Around an async
worker's perform (docs/async.md) it may be ``async def mw(worker, batch, call_next): ...; return await
call_next()``; a plain one's ``call_next()`` then returns an awaitable, to return.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Middleware = Callable[[Any, Any, Callable[[], Any]], Any]


def run_chain(middlewares: Sequence[Middleware], worker: Any, batch: Any, innermost: Callable[[], Any]) -> Any:
    """Call ``innermost`` inside every middleware, the first one outermost."""

    def step(i: int) -> Any:
        if i == len(middlewares):
            return innermost()
        return middlewares[i](worker, batch, lambda: step(i + 1))

    return step(0)


async def arun_chain(middlewares: Sequence[Middleware], worker: Any, batch: Any,
                     innermost: Callable[[], Awaitable[Any]]) -> Any:
    """``run_chain`` around an async worker's perform: a middleware may be a coroutine function (awaited) or
    plain (what it returns is awaited when awaitable). A plain one that calls ``call_next()`` and drops the
    awaitable still has the perform run: lowkiq never counts a batch performed whose perform did not run."""

    async def step(i: int) -> Any:
        if i == len(middlewares):
            return await innermost()
        made: list[Any] = []

        def call_next() -> Any:
            made.append(step(i + 1))
            return made[-1]

        result = middlewares[i](worker, batch, call_next)
        if inspect.isawaitable(result):
            result = await result
        for inner in made:
            if inspect.getcoroutinestate(inner) == inspect.CORO_CREATED:
                await inner
        return result

    return await step(0)
