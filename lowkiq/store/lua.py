"""Loads the Lua scripts of ``scripts/`` and runs them by SHA, through the transport.

redis-py's ``Script`` objects ask Redis ``SCRIPT EXISTS`` before every
pipeline; on the hot path that would double the round trips. Scripts run
here by EVALSHA; a node that answers NOSCRIPT (after a restart, a
``SCRIPT FLUSH``, or a failover: ``SCRIPT LOAD`` is not replicated) gets
the script loaded by the transport, and only that call is repeated.

A call is ``(script name, keyset, args)``: a keyset is any hashable object
whose ``all()`` lists the script's KEYS, all in one hash slot (one shard's
``ShardKeys``, or the membership keys). Every script call goes through a
``Wire``: the EVALSHA command packed here with each keyset's keys encoded
once, sent to the node that owns the keyset's slot, replies read straight
off the connection at half the client-side cost of redis-py's command path.
A server thread holds its own Wire (and connections) for the hot path;
``run``/``run_many`` borrow pooled connections for one call.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import redis

from ..transport import Batch, Transport, as_transport
from ..transport.errors import checked
from ..transport.resp import bulk, encode
from ..transport.session import Session
from ..transport.slots import Keyset, keyset_slot, routing_slot
from .keys import lua_prelude

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
    "range",
    "scan",
    "acquire",
    "renew",
    "release",
    "fence_floor",
    "member_beat",
    "member_leave",
    "layout",
    "audit",
    "pause",
    "history",
    "registry_forget",
    "registry_register",
    "registry_read",
    "confirm_take",
    "permit_take",
    "permit_extend",
    "permit_release",
    "untake",
    "schedule_tick",
    "schedule_pause",
    "history_trim",
    "stop_request",
    "depend_watch",
    "depend_park",
    "depend_deliver",
    "tagged",
    "group_pause",
    "scores_migrate",
)

Call = tuple[str, Keyset, Sequence[Any]]


# The scripts' libraries, one topic each (scripts/_lib.lua says how they are put together); each may use the
# ones before it. .luacheckrc lists them in the same order.
LIBRARIES = ("_lib", "_payloads", "_groups", "_spill", "_tags", "_moves", "_errors", "_filters", "_history",
             "_leases", "_depends")


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str


@cache
def script(name: str) -> LuaScript:
    folder = resources.files("lowkiq.store.scripts")
    lib = "".join(folder.joinpath(f"{part}.lua").read_text(encoding="utf-8") for part in LIBRARIES)
    body = _included(folder, folder.joinpath(f"{name}.lua").read_text(encoding="utf-8"))
    rare = {word for line in _RARE.findall(body) for word in _WORD.findall(line)}
    source = f"{lua_prelude()}{used_definitions(lib, body, rare)}\n{body}"
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


# ``--#rare name ...`` in a script: those library definitions (and what only they use) are built by ``rare()``,
# which the script calls before it uses any of them. A call that never needs them never builds their closures.
_RARE = re.compile(r"^\s*--#rare ([\w ]+)$", re.MULTILINE)


_INCLUDE = re.compile(r"^--#include (\w+)$", re.MULTILINE)


def _included(folder: Any, body: str) -> str:
    """``body`` with each ``--#include <script>`` line replaced by that script's body: a script that guards
    another (schedule_tick runs push's body) follows it as it changes, without a copy."""
    return _INCLUDE.sub(lambda m: folder.joinpath(f"{m.group(1)}.lua").read_text(encoding="utf-8"), body)


_DEFINITION = re.compile(r"^local (?:function )?(\w+)")
_WORD = re.compile(r"\w+")
# String literals and comments: their words name no definition ("before" in a comment is not a call of before()).
_NOT_CODE = re.compile(r"""'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|--\[\[.*?\]\]|--[^\n]*""", re.DOTALL)


def _code_words(text: str) -> set[str]:
    """The identifiers (and numbers) of Lua ``text``'s code."""
    return set(_WORD.findall(_NOT_CODE.sub(" ", text)))


def used_definitions(lib: str, body: str, rare: frozenset[str] | set[str] = frozenset()) -> str:
    """The library's top-level definitions that ``body`` uses, directly or through each other.

    Redis runs a script's whole chunk on every call, so each ``local function`` of the
    library is a closure built per call: about a microsecond for the whole library.
    A definition starts at a top-level ``local`` line, with the comment lines above it.

    ``rare``: names the body uses only on paths most calls do not take (``--#rare``). Those definitions, and the
    ones only they use, are written inside ``rare()``, which builds them on its first call: the other
    definitions stay top-level locals, built on every call.
    """
    blocks: list[tuple[str, list[str]]] = []
    comments: list[str] = []
    for line in lib.splitlines(keepends=True):
        found = _DEFINITION.match(line)
        if found:
            blocks.append((found.group(1), [*comments, line]))
            comments = []
        elif line.startswith("--") or (comments and not line.strip()):
            comments.append(line)  # a top-level comment: it belongs to the definition below it
        elif blocks:
            blocks[-1][1].append(line)
    words = _code_words(body)
    wanted = _reached(blocks, words)
    if not rare:
        return "".join("".join(lines) for name, lines in blocks if name in wanted)
    hot = _reached(blocks, words - set(rare))
    exported = [name for name, _ in blocks if name in rare and name in wanted and name not in hot]
    out = [("".join(lines)) for name, lines in blocks if name in hot]
    if exported:
        names = ", ".join(exported)
        inner = "".join("".join(lines) for name, lines in blocks if name in wanted and name not in hot)
        out.append(f"-- Built by rare() on first use (--#rare in the script): {names}.\n"
                   f"local {names}\n"
                   f"local function rare()\n"
                   f"  if {exported[0]} then return end\n"
                   f"  {names} = (function()\n{inner}\n  return {names}\n  end)()\n"
                   f"end\n")
    else:
        out.append("local function rare() end\n")  # every rare name is needed on every call anyway
    return "".join(out)


def _reached(blocks: Sequence[tuple[str, list[str]]], words: set[str]) -> set[str]:
    """The names of the definitions ``words`` use, directly or through each other."""
    wanted = set(words)
    for name, lines in reversed(blocks):  # a definition only uses the ones above it
        if name in wanted:
            wanted.update(_code_words("".join(lines)))
    return wanted


def now_arg(clock: Callable[[], float]) -> float | str:
    """A script's "now": "" with the real clock, so that the script reads the Redis server's clock, which every
    process shares whatever its host's clock says; a hand-moved clock (tests) passes its own time."""
    return "" if clock is time.time else clock()


@cache
def library() -> tuple[str, ...]:
    """Every script's source: a node that answers NOSCRIPT gets them all in one round trip."""
    return tuple(script(name).source for name in NAMES)


def run(client: Transport | redis.Redis, name: str, keyset: Keyset, args: Sequence[Any]) -> Any:
    """One script on one keyset, one round trip (two after a NOSCRIPT)."""
    return run_many(client, [(name, keyset, args)])[0]


def run_many(client: Transport | redis.Redis, calls: Sequence[Call], *, settle: bool = False) -> list[Any]:
    """Several scripts, each on its own keyset, in one round trip of wall time, on pooled connections.

    Errors are raised after every reply was read; see ``Wire.call_many``.
    """
    if not calls:
        return []
    with Wire.borrowed(client) as borrowed:
        return borrowed.call_many(calls, settle=settle)


def run_many_with(client: Transport | redis.Redis, calls: Sequence[Call],
                  commands: Sequence[tuple[str, Sequence[Any]]]) -> tuple[list[Any], list[Any]]:
    """Scripts, then plain commands ``(routing key, command)``, in one round trip of wall time.

    Replies in order, an error in its command's place: for reads that go with a listing.
    """
    with Wire.borrowed(client) as borrowed:
        extra = [(routing_slot(key), [encode(part) for part in command]) for key, command in commands]
        results = borrowed._send(calls, extra)
    return results[: len(calls)], results[len(calls):]


@lru_cache(maxsize=65536)
def _prefix(name: str, keyset: Keyset) -> tuple[int, bytes, int, str]:
    """EVALSHA, the SHA, the keys: the part of a call that never changes; its slot; the script's source."""
    keys = keyset.all()
    lua = script(name)
    parts = [b"EVALSHA", lua.sha.encode(), str(len(keys)).encode(), *(k.encode() for k in keys)]
    return len(parts), b"".join(bulk(p) for p in parts), keyset_slot(keyset), lua.source


def node_name(client: Transport | redis.Redis, keyset: Keyset) -> str:
    """The name of the node that serves ``keyset`` now."""
    return as_transport(client).topology().node_for(keyset_slot(keyset)).name


class Wire:
    """One thread's own connections to Redis (one per node it calls), for scripts on the hot path."""

    def __init__(self, client: Transport | redis.Redis, session: Session | None = None) -> None:
        self.transport = as_transport(client)
        self._session = session or self.transport.session()
        self._prefixes: dict[tuple[str, Keyset], tuple[int, bytes, int, str]] = {}

    @classmethod
    @contextmanager
    def borrowed(cls, client: Transport | redis.Redis) -> Iterator[Wire]:
        """A wire for one call (a ``with`` block), on the transport's kept session when it has one
        (``Transport.lent``)."""
        transport = as_transport(client)
        with transport.lent() as session:
            yield cls(transport, session)

    @property
    def client(self) -> Transport:
        return self.transport

    def call(self, name: str, keyset: Keyset, args: Sequence[Any]) -> Any:
        return self.call_many([(name, keyset, args)])[0]

    def call_many(self, calls: Sequence[Call], *, settle: bool = False) -> list[Any]:
        """Scripts pipelined in one round trip of wall time; raises after reading every reply.

        An error alone is raised as Redis answered it; when some calls ran and
        others failed, ``PartialWrite`` says which ran. With ``settle``, nothing
        is raised: an error is returned in its call's place (as the exception
        redis-py would raise; a ConnectionError when its node was lost), so the
        caller learns every outcome.
        """
        results = self._send(calls, ())
        return results if settle else checked(results, calls)

    def call_many_confirmed(self, calls: Sequence[Call], timeout_ms: int, *,
                            settle: bool = False) -> tuple[list[Any], dict[str, Any]]:
        """``call_many``, each node's scripts followed by ``WAIT 1 timeout_ms`` on the same connection.

        Still one round trip of wall time (plus the replica's). Returns the scripts'
        replies and, by node name, how many replicas acknowledged every write before
        the WAIT (an exception when that node failed). A script a node ran only after
        a NOSCRIPT reply was resent after the WAIT: its node shows 0, never too many.
        """
        topology = self.transport.topology()
        slot_of_node: dict[str, int] = {}
        for _, keyset, _ in calls:
            slot = keyset_slot(keyset)
            slot_of_node.setdefault(topology.node_for(slot).name, slot)
        waits = [(slot, (b"WAIT", b"1", str(int(timeout_ms)).encode())) for slot in slot_of_node.values()]
        results = self._send(calls, waits)
        replies, acknowledged = results[: len(calls)], results[len(calls):]
        confirmed = dict(zip(slot_of_node, acknowledged))
        return (replies if settle else checked(replies, calls)), confirmed

    def _send(self, calls: Sequence[Call], extra: Sequence[tuple[int, Sequence[bytes]]]) -> list[Any]:
        """Every call's reply in order (errors in place), then each ``extra`` command's (slot, command)."""
        packed = []
        slots = []
        sources: list[str | None] = []
        prefixes = self._prefixes
        for name, keyset, args in calls:
            cached = prefixes.get((name, keyset))
            if cached is None:
                cached = prefixes[(name, keyset)] = _prefix(name, keyset)
            count, prefix, slot, source = cached
            packed.append(b"*%d\r\n" % (count + len(args)) + prefix + b"".join([bulk(encode(a)) for a in args]))
            slots.append(slot)
            sources.append(source)
        for slot, command in extra:
            packed.append(b"*%d\r\n" % len(command) + b"".join(bulk(part) for part in command))
            slots.append(slot)
            sources.append(None)
        session = self._session
        quick = session.quick(packed[0] if len(packed) == 1 else b"".join(packed), len(packed))
        if quick is None:
            return session.execute(Batch(packed, slots, sources, library()))[0]
        results, errors = quick
        if errors:
            session.follow(Batch(packed, slots, sources, library()), results)
        return results

    def close(self, *, disconnect: bool = False) -> None:
        """Give the connections back to their pools."""
        self._session.close(disconnect=disconnect)
