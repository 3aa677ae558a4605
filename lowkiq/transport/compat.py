"""redis-py's own API on a transport, for code not yet on ``pipeline_commands``/``client_for``.

A command goes to the node that owns its key (its first argument; the second
of ``execute_command``). On a cluster, a pipeline (``transaction=False``) is
packed by redis-py, sent through the transport's batches (every node at
once, redirections followed) and its replies parsed by redis-py's own
callbacks, so callers see what a redis-py pipeline returns. A key-less
command (TIME) goes with the pipeline's first key. A pipeline spanning
nodes is not atomic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.exceptions import MovedError

LOST = (redis.ConnectionError, redis.TimeoutError, OSError)

if TYPE_CHECKING:
    # An import cycle on purpose, for type names only: transport.py builds these two on itself.
    from .transport import Transport


def key_of(name: str, args: tuple[Any, ...]) -> str | bytes | None:
    """The key a redis-py call names: the first argument, or the one after the command's name."""
    at = 1 if name == "execute_command" else 0
    key = args[at] if len(args) > at else None
    return key if isinstance(key, (str, bytes)) else None


def call(transport: Transport, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One redis-py command on the node of its key; after a MOVED (not run), once more on a fresh map."""
    key = key_of(name, args)
    try:
        return getattr(transport.client_for(key), name)(*args, **kwargs)
    except MovedError as exc:
        transport.refresh(hints={exc.slot_id: exc.node_addr})
        return getattr(transport.client_for(key), name)(*args, **kwargs)
    except LOST:
        transport.suspect()  # a failover may follow: read the deployment again next time
        raise


class RoutedPipeline:
    """``transport.pipeline(transaction=False)`` on a cluster: redis-py's pipeline API, routed per key."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._client = transport.client_for(None)
        self._stack = self._client.pipeline(transaction=False)  # packs arguments as redis-py does

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._stack, name)
        if not callable(method) or name in ("execute", "reset"):
            return method

        def record(*args: Any, **kwargs: Any) -> RoutedPipeline:
            method(*args, **kwargs)
            return self

        return record

    def __len__(self) -> int:
        return len(self._stack.command_stack)

    def __enter__(self) -> RoutedPipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.reset()

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = list(self._stack.command_stack)
        self._stack.reset()
        keys = [_command_key(args, options) for args, options in stack]
        first = next((k for k in keys if k is not None), "")
        replies = self._transport.pipeline_commands(
            [(first if key is None else key, args) for key, (args, _) in zip(keys, stack, strict=True)], settle=True)
        results = []
        for (args, options), reply in zip(stack, replies, strict=True):
            options = {k: v for k, v in options.items() if k not in ("keys", EMPTY_RESPONSE, NEVER_DECODE)}
            if isinstance(reply, BaseException):
                if raise_on_error:
                    raise reply
                results.append(reply)
                continue
            callback = self._client.response_callbacks.get(args[0])  # type: ignore[no-untyped-call]
            results.append(callback(reply, **options) if callback else reply)
        return results


def _command_key(args: tuple[Any, ...], options: dict[str, Any]) -> str | bytes | None:
    """The first key of a packed command: redis-py names it in ``keys``; else the first argument."""
    named = options.get("keys")
    if named:
        return named[0]  # type: ignore[no-any-return]
    key = args[1] if len(args) > 1 else None
    return key if isinstance(key, (str, bytes)) else None
