"""Loads the Lua scripts of ``scripts/`` and runs them by SHA.

redis-py's ``Script`` objects ask Redis ``SCRIPT EXISTS`` before every
pipeline; on the hot path that would double the round trips. Scripts run
here by EVALSHA, and only when Redis answers NOSCRIPT (after a restart or
``SCRIPT FLUSH``) are they loaded again and the call repeated.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Sequence

import redis
from redis.exceptions import NoScriptError

from .keys import ShardKeys

NAMES = (
    "push",
    "ack_and_take",
    "fail",
    "restore",
    "morgue_requeue",
    "morgue_delete",
    "delete",
    "perform_all_now",
    "kill_failed",
    "delete_failed",
    "shard_stats",
    "range",
)


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str


@cache
def script(name: str) -> LuaScript:
    folder = resources.files("lowkiq.queue.scripts")
    lib = folder.joinpath("_lib.lua").read_text(encoding="utf-8")
    body = folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    source = f"{lib}\n{body}"
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


def load_all(client: redis.Redis) -> None:
    for name in NAMES:
        client.script_load(script(name).source)


def run(client: redis.Redis, name: str, shard: ShardKeys, args: Sequence[Any]) -> Any:
    """One script on one shard, one round trip (two after a Redis restart)."""
    s = script(name)
    keys = shard.all()
    try:
        return client.execute_command("EVALSHA", s.sha, len(keys), *keys, *args)
    except NoScriptError:
        client.script_load(s.source)
        return client.execute_command("EVALSHA", s.sha, len(keys), *keys, *args)


def run_many(client: redis.Redis, calls: Sequence[tuple[str, ShardKeys, Sequence[Any]]]) -> list[Any]:
    """Several scripts, each on its own shard, in one pipelined round trip.

    Errors are raised after the whole pipeline ran; a NOSCRIPT answer only
    ever means that script did not run, so exactly those calls are repeated.
    """
    if not calls:
        return []
    results = _pipeline(client, calls)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        load_all(client)
        retried = _pipeline(client, [calls[i] for i in missing])
        for i, r in zip(missing, retried):
            results[i] = r
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def _pipeline(client: redis.Redis, calls: Sequence[tuple[str, ShardKeys, Sequence[Any]]]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for name, shard, args in calls:
        keys = shard.all()
        pipe.execute_command("EVALSHA", script(name).sha, len(keys), *keys, *args)
    return pipe.execute(raise_on_error=False)
