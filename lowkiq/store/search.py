"""Content search: the jobs of one area whose error class, error text or payloads match, found by bounded
steps of scan.lua, shard by shard.

A step examines at most STEP_IDS ids of one shard, and stops once it has done STEP_WORK units of work
(each byte read a unit, each byte compared with a needle ``compare_weight`` more); it answers where the
next one starts, inside an id when a spilled id's payloads are what took the budget. A search of a
million jobs, or of one id holding 5,000 payloads of 10 KB, is many short scripts, each well under the
50 ms an operator's read may hold Redis. A page of results stops after ``examined_budget`` ids or
PAGE_WORK units of work, whatever it found, and says where to continue (``Continuation``) and how many
ids were examined so far: a page answers in bounded time, perhaps with fewer rows than asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..transport import Transport
from . import codec, lua
from .keys import QueueKeys

# Ids one scan.lua step examines at most: about 5 ms of Redis time for small jobs.
STEP_IDS = 1000
# Work one step does at most, in bytes read (a byte compared costs compare_weight more): 1 MiB is a few ms
# of Redis time, 350 KB of payloads for a short needle, 150 KB for a 200-character one. Steps of 4 MB read,
# without counting the comparison, held Redis 150 to 420 ms over payloads of 1 MB.
STEP_WORK = 1 << 20
# Ids a page examines at most, and work it does at most, before it answers with a continuation: well under
# a second of steps.
PAGE_EXAMINED = 50_000
PAGE_WORK = 64 << 20
# A needle's length at most, in characters: a filter is a word or a phrase, not a document.
MAX_NEEDLE = 200
AREAS = ("enqueued", "morgue")
# A step's cursor inside an id: its section letter in capitals, the payload's position, the byte in it, the id.
_INSIDE = re.compile(r"[FRM]\d{1,12},\d{1,12},.+", re.DOTALL)


def compare_weight(needle: str, match_case: bool = True) -> int:
    """Units of work of comparing one byte with ``needle`` (a byte read is one). Lua's plain string.find
    costs about twice a read per byte where the needle's first byte is frequent, and more as the needle
    grows (``aaa…ab`` over ``aaaa…``): 2, and one more per 50 bytes of needle. Ignoring case folds each byte
    compared first (string.lower, a copy): one more."""
    return 2 + len(needle.encode()) // 50 + (0 if match_case else 1)


@dataclass(frozen=True)
class Content:
    """What a job's content must hold: its error class equal to ``error_class``, its error text containing
    ``error``, one of its payloads (as stored: serialized, JSON by default) containing ``payload``.
    An empty field asks nothing; a filter with all three empty matches every job. Letters compare
    ignoring case unless ``match_case``: "timeout" finds "TimeoutError" (ASCII letters only: Redis's
    Lua folds bytes, so "É" and "é" stay different).

    Example::

        Content(error="timeout")                    # finds "Timeout after 30 s" and "timeout_ms: bad value"
        Content(error="Timeout", match_case=True)   # finds only the first
    """

    error_class: str = ""
    error: str = ""
    payload: str = ""
    match_case: bool = False

    def __post_init__(self) -> None:
        for name in ("error_class", "error", "payload"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ValueError(f"{name} must be text, got {value!r:.100}")
            if len(value) > MAX_NEEDLE:
                raise ValueError(f"{name} must be at most {MAX_NEEDLE} characters, got {len(value):,}")
            if "\x00" in value:
                raise ValueError(f"{name} must not hold a NUL character")

    def __bool__(self) -> bool:
        return bool(self.error_class or self.error or self.payload)

    def args(self) -> tuple[str, str, str]:
        return (self.error_class, self.error, self.payload)

    def case_arg(self) -> str:
        """How the scripts read ``match_case``: "1" to match case, "" to ignore it."""
        return "1" if self.match_case else ""

    def describe(self) -> str:
        parts = []
        if self.error_class:
            parts.append(f"error class {self.error_class!r}")
        if self.error:
            parts.append(f"error containing {self.error!r}")
        if self.payload:
            parts.append(f"payload containing {self.payload!r}")
        if parts and self.match_case:
            parts.append("matching case")
        return ", ".join(parts)


@dataclass(frozen=True)
class Continuation:
    """Where a search goes on: the shard, the cursor scan.lua answered there, and the ids examined so far."""

    shard: int
    cursor: str
    examined: int

    def encode(self) -> str:
        return f"{self.examined}:{self.shard}:{self.cursor}"

    @classmethod
    def decode(cls, token: str) -> Continuation:
        examined, _, rest = token.partition(":")
        shard, sep, cursor = rest.partition(":")
        try:
            if not sep or (cursor[:1] not in ("f", "r", "m", "") and not _INSIDE.fullmatch(cursor)):
                raise ValueError
            found = cls(int(shard), cursor, int(examined))
        except ValueError:
            raise ValueError(f"malformed continuation {token[:100]!r}: pass back the one a page answered") from None
        if found.shard < 0 or found.examined < 0:
            raise ValueError(f"malformed continuation {token[:100]!r}: pass back the one a page answered")
        return found


@dataclass(frozen=True)
class Found:
    """A page of a search: the matching ids (shard by shard, by id in each), where to go on (None: the search
    is done), the ids examined by this search so far, and the ids the area holds (all shards)."""

    ids: list[str]
    next: Continuation | None
    examined: int
    total: int


@dataclass(frozen=True)
class Bounds:
    """The listing's own min..max on ``index``, which scan.lua checks with the content (see matches)."""

    index: str = "id"
    lo: str = ""
    hi: str = ""


EVERY = Bounds()


class Search:
    def __init__(self, client: Transport, keys: QueueKeys) -> None:
        self.client = client
        self.keys = keys
        self._shards = keys.shards()

    def page(self, area: str, content: Content, *, limit: int, after: Continuation | None = None,
             bounds: Bounds | None = None, examined_budget: int = PAGE_EXAMINED,
             work_budget: int = PAGE_WORK) -> Found:
        """Up to ``limit`` matching ids from ``after`` on, examining at most about ``examined_budget`` ids and
        doing about ``work_budget`` units of work at most (see STEP_WORK)."""
        _area(area)
        bounds = bounds or EVERY
        if after is not None and after.shard >= len(self._shards):
            raise ValueError(f"the continuation names shard {after.shard}, but the worker has {len(self._shards)}")
        shard, cursor, before = (after.shard, after.cursor, after.examined) if after else (0, "", 0)
        ids: list[str] = []
        examined = work = 0
        while shard < len(self._shards) and len(ids) < limit and examined < examined_budget and work < work_budget:
            step = min(STEP_IDS, examined_budget - examined)
            found, n, cursor_next, spent = self._step(area, shard, cursor, step, content, bounds, limit - len(ids))
            examined += n
            work += spent
            ids += found
            if cursor_next is None:
                shard, cursor = shard + 1, ""
            else:
                cursor = cursor_next
        done = shard >= len(self._shards)
        following = None if done else Continuation(shard, cursor, before + examined)
        return Found(ids, following, before + examined, self.total(area))

    def ids(self, area: str, content: Content, *, bounds: Bounds | None = None) -> Iterator[list[str]]:
        """Every matching id, a step's worth at a time: many short scripts, however big the area."""
        _area(area)
        bounds = bounds or EVERY
        for shard in range(len(self._shards)):
            cursor = ""
            while True:
                found, _, following, _ = self._step(area, shard, cursor, STEP_IDS, content, bounds, STEP_IDS)
                if found:
                    yield found
                if following is None:
                    break
                cursor = following

    def total(self, area: str) -> int:
        """The ids the area holds, all shards, in one round trip."""
        names = ("morgue_ids_lex_zset",) if area == "morgue" else ("ids_lex_zset", "retried_ids_lex_zset")
        commands = [(key, ("ZCARD", key)) for shard in self._shards for key in (getattr(shard, n) for n in names)]
        return sum(int(n) for n in self.client.pipeline_commands(commands))

    def _step(self, area: str, shard: int, cursor: str, step: int, content: Content,
              bounds: Bounds, wanted: int) -> tuple[list[str], int, str | None, int]:
        """The ids one step found, how many it examined, where the next goes on (None: the shard is done), and
        the work it did."""
        args = (area, cursor, step, STEP_WORK, *content.args(), bounds.index, bounds.lo, bounds.hi, wanted,
                compare_weight(content.error, content.match_case),
                compare_weight(content.payload, content.match_case), content.case_arg())
        found, examined, following, work = lua.run(self.client, "scan", self._shards[shard], args)
        return ([codec.text(i) for i in found], int(examined), codec.text(following) if following else None,
                int(work))


def _area(area: str) -> None:
    if area not in AREAS:
        raise ValueError(f"area must be one of {', '.join(AREAS)}, got {area!r}")
