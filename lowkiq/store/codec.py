"""Decoding what the Lua scripts store: msgpack payload lists and processing records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from .. import stored_error
from ..jobs import Job, MorgueJob, UndecodablePayload


def shard_of(job_id: str, shards_count: int) -> int:
    """The shard of an id: crc32 of its UTF-8 bytes, as Lowkiq computes it."""
    import zlib

    return zlib.crc32(job_id.encode()) % shards_count


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


# Time scores in Redis (perform_in, a dead job's updated_at): seconds as floats before layout 3, integer
# microseconds in a shard its migration marked. The units never overlap: below US_AT a score is seconds (until
# the year 33658), at or above it microseconds, so a reader understands both (_lib.lua, docs/redis.md).
US_AT = 1e12
# The latest perform_in a producer may write as seconds: a later one would read as microseconds (as early as
# 1970), so it is written as this, as far from now as it was before.
LATEST_SECONDS = 999_999_999_999.0


def seconds(raw: Any) -> float:
    """A stored time score in seconds, whichever unit it was written in."""
    value = float(raw)
    return value / 1_000_000 if value >= US_AT else value


def first_score(reply: Any) -> float:
    """The score of the first member of a non-empty reply WITHSCORES, as stored: [member, score, ...] in RESP2,
    [[member, score], ...] in RESP3."""
    pair = reply[0] if isinstance(reply[0], (list, tuple)) else reply
    return float(pair[1])


def time_ranges(lo: str, hi: str) -> list[tuple[str, str]]:
    """A ``lo``..``hi`` range of seconds ('' unbounded) as the two raw score ranges that hold it: the seconds
    scores and the microseconds ones (ZCOUNT each and add)."""
    in_seconds = (lo or "-inf", hi if hi and float(hi) < US_AT else f"({US_AT:.0f}")
    lo_us = f"{max(US_AT, round(float(lo) * 1_000_000)):.0f}" if lo else f"{US_AT:.0f}"
    hi_us = f"{round(float(hi) * 1_000_000):.0f}" if hi else "+inf"
    return [in_seconds, (lo_us, hi_us)]


# What a record some other writer corrupted raises when read: shown as broken, never fatal to a page.
CORRUPT = (ValueError, TypeError, IndexError, msgpack.UnpackException)


def payloads(blob: bytes, load_payload: Callable[[bytes], Any]) -> list[tuple[Any, float]]:
    """A job's payloads for reading: one that cannot be loaded shows as an UndecodablePayload,
    and so does a whole list that is not the msgpack [payload, score, ...] the scripts write."""
    try:
        flat = msgpack.unpackb(blob, raw=True)
        pairs = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
    except CORRUPT as exc:
        return [(UndecodablePayload(bytes(blob), f"not a payload list: {type(exc).__name__}: {exc}"), 0.0)]
    return [(_tolerant(load_payload, raw), score) for raw, score in pairs]


def _tolerant(load_payload: Callable[[bytes], Any], raw: bytes) -> Any:
    try:
        return load_payload(raw)
    except Exception as exc:
        return UndecodablePayload(raw, f"{type(exc).__name__}: {exc}")


# A job's record in processing is four msgpack values written one after another (ack_and_take.lua):
# retry_count, perform_in, its error or false, its payload list. With this header they read as one array.
_RECORD = b"\x94"


def processing_fields(blob: bytes) -> tuple[Any, Any, Any, Any]:
    """A processing record's retry_count, perform_in, error and flat payload list, as msgpack wrote them."""
    retry_count, perform_in, error, flat = msgpack.unpackb(_RECORD + blob, raw=True)
    return retry_count, perform_in, error, flat


def processing_record(job_id: str, blob: bytes, load_payload: Callable[[bytes], Any], load_error: Callable[[bytes], str]) -> Job:
    try:
        retry_count, perform_in, error, flat = processing_fields(blob)
        pairs = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        text, traceback = stored_error.load(error, load_error)
        return Job(
            id=job_id,
            payloads=[(_tolerant(load_payload, raw), score) for raw, score in pairs],
            perform_in=seconds(perform_in),
            retry_count=int(retry_count),
            error=text,
            traceback=traceback,
        )
    except CORRUPT as exc:
        problem = f"not a processing record: {type(exc).__name__}: {exc}"
        return Job(id=job_id, payloads=[(UndecodablePayload(bytes(blob), problem), 0.0)], perform_in=0.0,
                   retry_count=-1, error=f"<undecodable processing record ({problem})>")


def morgue_job(job_id: str, blob: bytes, updated_at: Any, error: bytes | None,
               load_payload: Callable[[bytes], Any], load_error: Callable[[bytes], str]) -> MorgueJob:
    text, traceback = stored_error.load(error, load_error)
    return MorgueJob(
        id=job_id,
        payloads=payloads(blob, load_payload),
        updated_at=seconds(updated_at),
        error=text,
        traceback=traceback,
    )
