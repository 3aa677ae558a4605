"""Reads of one queue for the console: ranges with keyset paging, lookups by id, processing.

Each shard answers a page of its own index (one pipelined round trip for
all shards), the pages are merged here, and the page's jobs are fetched in
a second round trip: two round trips per page, whatever the queue's size.

A page's jobs are cut in Redis (range.lua) to ROW_BYTES of payloads each, and
a job's own page to JOB_BYTES: what a page does not show never crosses the
wire, and a job says what was cut (``Job.clipped``).
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgpack
import redis

from ..jobs import Clipped, ClippedPayload, Job, MorgueJob
from ..transport import Transport, as_transport
from ..transport.errors import first_error
from . import codec, lua
from .keys import QueueKeys, ShardKeys

T = TypeVar("T")

ENQUEUED_ORDERS = ("id", "perform_in", "retry_count")
MORGUE_ORDERS = ("id", "updated_at")
MAX_LIMIT = 1000
# Bytes of payloads a listing row carries at most (pages and API listings): a row shows the start of
# the first payload, so 4 KB is more than it shows, and a page of 100 rows moves 0.5 MB at most,
# whatever its jobs hold (500 jobs of 1 MB once made a page of 500 MB).
ROW_BYTES = 4096
# Of a row's error, and of its traceback (which rows do not show): a row shows the error's first lines.
ROW_ERROR_BYTES = 2048
# A job's own page (and the API's lookup of one job): whole up to 1 MB, cut beyond, with a note.
JOB_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Cursor:
    """The position of a row in an ordering: its score (0 for id orders) and its id."""

    score: float
    id: str

    def encode(self) -> str:
        return f"{self.score!r}:{self.id}"

    @classmethod
    def decode(cls, token: str) -> Cursor:
        score, sep, job_id = token.partition(":")
        try:
            if not sep:
                raise ValueError
            return cls(float(score), job_id)
        except ValueError:
            raise ValueError(f"malformed cursor {token!r}: expected '<score>:<id>'") from None


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]
    # Cursors of the first and last rows, to ask for the previous or next page.
    first: Cursor | None
    last: Cursor | None
    has_more: bool
    # Every row within the listing's min..max, all pages together, when it was asked for.
    matching: int | None = None


def _bound(value: Any, order_by: str, name: str) -> str:
    if value is None or value == "":
        return ""
    if order_by == "id":
        return str(value)
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number when ordering by {order_by}, got {value!r}") from None


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an int in 1..{MAX_LIMIT}, got {limit!r}")
    return limit


class Queries:
    def __init__(
        self,
        client: Transport | redis.Redis,
        keys: QueueKeys,
        *,
        load_payload: Callable[[bytes], Any],
        load_error: Callable[[bytes], str],
    ) -> None:
        self.client = as_transport(client)
        self.keys = keys
        self.load_payload = load_payload
        self.load_error = load_error

    @functools.cached_property
    def _shards(self) -> list[ShardKeys]:
        # Built on the first read of every shard: a lookup of one id (a job page, the search through every
        # worker) names only its own shard, never 4,096 keys per worker.
        return self.keys.shards()

    # ---- ranges -------------------------------------------------------

    def enqueued(
        self,
        order_by: str = "perform_in",
        *,
        desc: bool = False,
        min: Any = None,
        max: Any = None,
        limit: int = 100,
        after: Cursor | None = None,
        before: Cursor | None = None,
        with_count: bool = False,
    ) -> Page[Job]:
        """A page of the queue (fresh and retries) ordered by id, perform_in or retry_count; ``with_count``
        also counts every matching job (``Page.matching``) in the same round trip."""
        if order_by not in ENQUEUED_ORDERS:
            raise ValueError(f"order_by must be one of {', '.join(ENQUEUED_ORDERS)}, got {order_by!r}")
        count = self._enqueued_count_commands(order_by, min, max) if with_count else None
        rows = functools.partial(self.jobs, cap=ROW_BYTES, error_cap=ROW_ERROR_BYTES)
        return self._page(order_by, desc, min, max, limit, after, before, rows, count)

    def _enqueued_count_commands(self, order_by: str, min: Any, max: Any) -> list[tuple[str, tuple[Any, ...]]]:
        lo, hi = _bound(min, order_by, "min"), _bound(max, order_by, "max")
        commands: list[tuple[str, tuple[Any, ...]]] = []
        for shard in self._shards:
            if order_by == "id":
                lex = (f"[{lo}" if lo else "-", f"[{hi}" if hi else "+")
                commands.append((shard.ids_lex_zset, ("ZLEXCOUNT", shard.ids_lex_zset, *lex)))
                commands.append((shard.retried_ids_lex_zset, ("ZLEXCOUNT", shard.retried_ids_lex_zset, *lex)))
            elif order_by == "perform_in":
                key = shard.ids_by_perform_in_zset
                commands += [(key, ("ZCOUNT", key, *bounds)) for bounds in codec.time_ranges(lo, hi)]
            else:
                # Fresh jobs count as retry_count -1 and are not in the retry index: they are the id index.
                if (lo == "" or float(lo) <= -1) and (hi == "" or float(hi) >= -1):
                    commands.append((shard.ids_lex_zset, ("ZCARD", shard.ids_lex_zset)))
                key = shard.ids_by_retry_count_zset
                commands.append((key, ("ZCOUNT", key, lo if lo and float(lo) > 0 else "0", hi or "+inf")))
        return commands

    def enqueued_ids(self, order_by: str = "perform_in", *, min: Any = None, max: Any = None,
                     chunk: int = 1000) -> Iterator[list[str]]:
        """The ids of the queued jobs within ``min``..``max``, in chunks of at most ``chunk``, in order.

        As ``morgue_ids``: each chunk starts after the last id of the one before, so acting on a
        chunk (delete, kill, perform now) between two reads neither skips nor repeats an id.
        """
        if order_by not in ENQUEUED_ORDERS:
            raise ValueError(f"order_by must be one of {', '.join(ENQUEUED_ORDERS)}, got {order_by!r}")
        lo, hi = _bound(min, order_by, "min"), _bound(max, order_by, "max")
        cursor: Cursor | None = None
        while True:
            rows = self._positions(order_by, False, lo, hi, cursor, _limit(chunk))
            if not rows:
                return
            yield [job_id for _, job_id in rows]
            cursor = Cursor(*rows[-1])

    def morgue(
        self,
        order_by: str = "updated_at",
        *,
        desc: bool = False,
        min: Any = None,
        max: Any = None,
        limit: int = 100,
        after: Cursor | None = None,
        before: Cursor | None = None,
        with_count: bool = False,
    ) -> Page[MorgueJob]:
        """A page of the morgue ordered by id or updated_at; ``with_count`` also counts every matching row
        (``Page.matching``) in the same round trip."""
        if order_by not in MORGUE_ORDERS:
            raise ValueError(f"order_by must be one of {', '.join(MORGUE_ORDERS)}, got {order_by!r}")
        count = self._morgue_count_commands(order_by, min, max) if with_count else None
        rows = functools.partial(self.morgue_jobs, cap=ROW_BYTES, error_cap=ROW_ERROR_BYTES)
        return self._page("morgue_" + order_by, desc, min, max, limit, after, before, rows, count)

    def morgue_count(self, order_by: str = "updated_at", *, min: Any = None, max: Any = None) -> int:
        """Dead jobs within ``min``..``max`` of ``order_by`` (inclusive; empty: unbounded), in one round trip."""
        if order_by not in MORGUE_ORDERS:
            raise ValueError(f"order_by must be one of {', '.join(MORGUE_ORDERS)}, got {order_by!r}")
        return sum(int(n) for n in self.client.pipeline_commands(self._morgue_count_commands(order_by, min, max)))

    def _morgue_count_commands(self, order_by: str, min: Any, max: Any) -> list[tuple[str, tuple[Any, ...]]]:
        lo, hi = _bound(min, order_by, "min"), _bound(max, order_by, "max")
        commands: list[tuple[str, tuple[Any, ...]]] = []
        for shard in self._shards:
            if order_by == "id":
                key = shard.morgue_ids_lex_zset
                commands.append((key, ("ZLEXCOUNT", key, f"[{lo}" if lo else "-", f"[{hi}" if hi else "+")))
            else:
                key = shard.morgue_ids_by_updated_at_zset
                commands += [(key, ("ZCOUNT", key, *bounds)) for bounds in codec.time_ranges(lo, hi)]
        return commands

    def morgue_ids(self, order_by: str = "updated_at", *, min: Any = None, max: Any = None,
                   chunk: int = 1000) -> Iterator[list[str]]:
        """The ids of the dead jobs within ``min``..``max``, in chunks of at most ``chunk``, in order.

        Each chunk costs one round trip of O(log n + chunk) per shard, and starts after the
        last id of the one before: acting on a chunk between two reads (requeue, delete)
        neither skips nor repeats an id.
        """
        if order_by not in MORGUE_ORDERS:
            raise ValueError(f"order_by must be one of {', '.join(MORGUE_ORDERS)}, got {order_by!r}")
        lo, hi = _bound(min, order_by, "min"), _bound(max, order_by, "max")
        cursor: Cursor | None = None
        while True:
            rows = self._merged("morgue_" + order_by, False, lo, hi, cursor, _limit(chunk))
            if not rows:
                return
            yield [job_id for _, job_id in rows]
            cursor = Cursor(*rows[-1])

    def _page(self, index: str, desc: bool, min: Any, max: Any, limit: int, after: Cursor | None,
              before: Cursor | None, fetch: Callable[[list[str]], Sequence[Any]],
              count: list[tuple[str, tuple[Any, ...]]] | None = None) -> Page[Any]:
        limit = _limit(limit)
        order_by = index.removeprefix("morgue_")
        lo, hi = _bound(min, order_by, "min"), _bound(max, order_by, "max")
        backwards = before is not None
        cursor = before if backwards else after
        # Ask one row more than shown to know whether another page follows.
        matching = None
        if count is None:
            rows = self._positions(index, desc != backwards, lo, hi, cursor, limit + 1)
        elif index == "retry_count":  # read in sections (fresh, then retried): the count takes its own trip
            rows = self._positions(index, desc != backwards, lo, hi, cursor, limit + 1)
            matching = sum(int(n) for n in self.client.pipeline_commands(count))
        else:
            rows, counted = self._merged_with(index, desc != backwards, lo, hi, cursor, limit + 1, count)
            matching = sum(int(n) for n in first_error(counted))
        has_more = len(rows) > limit
        rows = rows[:limit]
        if backwards:
            rows.reverse()
        jobs = fetch([job_id for _, job_id in rows])
        by_id = {job.id: job for job in jobs}
        shown = [by_id[job_id] for _, job_id in rows if job_id in by_id]
        first = Cursor(*rows[0]) if rows else None
        last = Cursor(*rows[-1]) if rows else None
        return Page(shown, first, last, has_more, matching)

    def _positions(self, index: str, desc: bool, lo: str, hi: str, cursor: Cursor | None, limit: int) -> list[tuple[float, str]]:
        if index == "retry_count":
            return self._retry_count_positions(desc, lo, hi, cursor, limit)
        return self._merged(index, desc, lo, hi, cursor, limit)

    def _merged(self, index: str, desc: bool, lo: str, hi: str, cursor: Cursor | None, limit: int) -> list[tuple[float, str]]:
        return self._merged_with(index, desc, lo, hi, cursor, limit, ())[0]

    def _merged_with(self, index: str, desc: bool, lo: str, hi: str, cursor: Cursor | None, limit: int,
                     commands: Sequence[tuple[str, tuple[Any, ...]]]) -> tuple[list[tuple[float, str]], list[Any]]:
        """The merged positions, and the replies of ``commands`` sent in the same round trip."""
        after_score = repr(cursor.score) if cursor else ""
        after_id = cursor.id if cursor else ""
        args = (index, "1" if desc else "0", lo, hi, after_score, after_id, limit)
        calls: list[lua.Call] = [("range", shard, args) for shard in self._shards]
        if commands:
            scripts, extra = lua.run_many_with(self.client, calls, commands)
        else:
            scripts, extra = lua.run_many(self.client, calls, settle=True), []
        # A read: the first error is the answer, whatever the other shards said.
        replies = first_error(scripts)
        per_shard = [
            [(float(reply[i + 1]), codec.text(reply[i])) for i in range(0, len(reply), 2)] for reply in replies
        ]
        # Each shard's page is sorted as Redis sorts: by score, then bytewise by id.
        merged = heapq.merge(*per_shard, key=lambda row: (row[0], row[1].encode()), reverse=desc)
        return list(itertools.islice(merged, limit)), extra

    def _retry_count_positions(self, desc: bool, lo: str, hi: str, cursor: Cursor | None, limit: int) -> list[tuple[float, str]]:
        # Fresh jobs (retry_count -1) are not in the retry index: they are the ids
        # of the id index that the retry index lacks, ordered by id.
        fresh_in_range = (lo == "" or float(lo) <= -1) and (hi == "" or float(hi) >= -1)
        fresh_cursor = cursor if cursor and cursor.score == -1 else None
        retries_lo = lo if lo and float(lo) > 0 else "0"
        sections: list[Callable[[], list[tuple[float, str]]]] = []
        fresh = lambda: self._merged("fresh", desc, "", "", fresh_cursor, limit)  # noqa: E731
        retried_cursor = cursor if cursor and cursor.score >= 0 else None
        retries = lambda: self._merged("retry_count", desc, retries_lo, hi, retried_cursor, limit)  # noqa: E731
        if desc:
            if cursor is None or cursor.score >= 0:
                sections.append(retries)
            if fresh_in_range:
                sections.append(fresh)
        else:
            if fresh_in_range and (cursor is None or cursor.score == -1):
                sections.append(fresh)
            sections.append(retries)
        rows: list[tuple[float, str]] = []
        for section in sections:
            rows += section()[: limit - len(rows)]
            if len(rows) >= limit:
                break
        return rows

    # ---- lookups ------------------------------------------------------

    def jobs(self, ids: Iterable[str], *, cap: int | None = JOB_BYTES,
             error_cap: int | None = JOB_BYTES) -> list[Job]:
        """Queued jobs by id, in the order given; missing ids are left out.

        Each job's payloads are cut in Redis to ``cap`` bytes, its error and traceback to ``error_cap``
        each (None: whole); a job cut says so in ``Job.clipped``. One round trip.
        """
        ids = [str(i) for i in ids]
        found: dict[str, Job] = {}
        for job_id, row in self._rows("jobs", ids, cap, error_cap):
            shown, held, size, cut, perform_in, retry_count, error, error_size, traceback, traceback_size = row
            payloads, clipped, text, trace = self._clipped(shown, held, size, cut, cap, error, error_size,
                                                           traceback, traceback_size)
            found[job_id] = Job(
                id=job_id,
                payloads=payloads,
                perform_in=float(perform_in),
                retry_count=int(float(retry_count)) if retry_count is not None else -1,
                error=text,
                traceback=trace,
                clipped=clipped,
            )
        return [found[i] for i in ids if i in found]

    def morgue_jobs(self, ids: Iterable[str], *, cap: int | None = JOB_BYTES,
                    error_cap: int | None = JOB_BYTES) -> list[MorgueJob]:
        """Morgue jobs by id, in the order given; missing ids are left out. Cut as ``jobs`` cuts them."""
        ids = [str(i) for i in ids]
        found: dict[str, MorgueJob] = {}
        for job_id, row in self._rows("morgue_jobs", ids, cap, error_cap):
            shown, held, size, cut, updated_at, _, error, error_size, traceback, traceback_size = row
            payloads, clipped, text, trace = self._clipped(shown, held, size, cut, cap, error, error_size,
                                                           traceback, traceback_size)
            found[job_id] = MorgueJob(id=job_id, payloads=payloads, updated_at=float(updated_at), error=text,
                                      traceback=trace, clipped=clipped)
        return [found[i] for i in ids if i in found]

    def _rows(self, kind: str, ids: Sequence[str], cap: int | None,
              error_cap: int | None) -> Iterator[tuple[str, list[Any]]]:
        """(id, row) of each job found, read and cut by range.lua: one script per shard, one round trip."""
        by_shard = self._group(ids)
        limits = ("" if cap is None else cap, "" if error_cap is None else error_cap)
        calls: list[lua.Call] = [("range", self.keys.shard(shard), (kind, *limits, *shard_ids))
                                 for shard, shard_ids in by_shard.items()]
        # A read: the first error is the answer, whatever the other shards said.
        replies = first_error(lua.run_many(self.client, calls, settle=True))
        for shard_ids, reply in zip(by_shard.values(), replies):
            for job_id, row in zip(shard_ids, reply):
                # The job may have been taken or deleted since its page was read: then it is simply gone.
                if row:
                    yield job_id, row

    def _clipped(self, shown: bytes, held: int, size: int, cut: int, cap: int | None, error: bytes | None,
                 error_size: int, traceback: bytes | None,
                 traceback_size: int) -> tuple[list[tuple[Any, float]], Clipped | None, str | None, str | None]:
        """The payloads, what was cut, the error and the traceback of a row as range.lua cut it."""
        payloads = codec.payloads(shown, self.load_payload)
        if cut and payloads:
            # The last payload shown is the head of one the cap cut: shown as such, never loaded.
            try:
                head = bytes(msgpack.unpackb(shown, raw=True)[-2])
            except codec.CORRUPT:
                head = b""
            payloads[-1] = (ClippedPayload(head, int(cut)), payloads[-1][1])
        text = self.load_error(error) if error else None
        if text is not None and error_size > len(error or b""):
            text += f"... <error cut: {len(error or b''):,} of {error_size:,} bytes shown>"
        trace = traceback.decode("utf-8", "replace") if traceback else None
        if trace is not None and traceback_size > len(traceback or b""):
            trace += f"\n... <traceback cut: {len(traceback or b''):,} of {traceback_size:,} bytes shown>"
        errors_cut = error_size > len(error or b"") or traceback_size > len(traceback or b"")
        clipped = None
        if size > len(shown) or errors_cut:
            clipped = Clipped(payloads=int(held), shown=len(payloads) if size > len(shown) else int(held),
                              bytes=int(size), cap=int(cap or 0),
                              error_bytes=int(error_size + traceback_size) if errors_cut else 0)
        return payloads, clipped, text, trace

    def job(self, job_id: str) -> Job | None:
        found = self.jobs([job_id])
        return found[0] if found else None

    def morgue_job(self, job_id: str) -> MorgueJob | None:
        found = self.morgue_jobs([job_id])
        return found[0] if found else None

    def busy(self, shards: Sequence[int] | None = None) -> list[Job]:
        """Jobs in processing right now, shard by shard."""
        shards = range(self.keys.shards_count) if shards is None else shards
        keys = [self._shards[s].processing_hash for s in shards]
        jobs = []
        for reply in self.client.pipeline_commands([(key, ("HGETALL", key)) for key in keys]):
            # A map in RESP3 (redis-py's default), a flat list in RESP2.
            records = sorted(reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2]))
            for job_id, blob in records:
                jobs.append(codec.processing_record(codec.text(job_id), blob, self.load_payload, self.load_error))
        return jobs

    def busy_job(self, job_id: str) -> Job | None:
        key = self.keys.shard(codec.shard_of(job_id, self.keys.shards_count)).processing_hash
        [blob] = self.client.pipeline_commands([(key, ("HGET", key, job_id))])
        return codec.processing_record(job_id, blob, self.load_payload, self.load_error) if blob else None

    def _group(self, ids: Sequence[str]) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for job_id in ids:
            groups.setdefault(codec.shard_of(job_id, self.keys.shards_count), []).append(job_id)
        return groups

