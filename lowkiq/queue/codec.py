"""Decoding what the Lua scripts store: msgpack payload lists and processing records."""

from __future__ import annotations

from typing import Any, Callable

import msgpack

from ..jobs import Job, MorgueJob, UndecodablePayload


def shard_of(job_id: str, shards_count: int) -> int:
    """The shard of an id: crc32 of its UTF-8 bytes, as Lowkiq computes it."""
    import zlib

    return zlib.crc32(job_id.encode()) % shards_count


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def payloads(blob: bytes, load_payload: Callable[[bytes], Any]) -> list[tuple[Any, float]]:
    """A job's payloads for reading: one that cannot be loaded shows as an UndecodablePayload."""
    flat = msgpack.unpackb(blob, raw=True)
    return [(_tolerant(load_payload, flat[i]), float(flat[i + 1])) for i in range(0, len(flat), 2)]


def _tolerant(load_payload: Callable[[bytes], Any], raw: bytes) -> Any:
    try:
        return load_payload(raw)
    except Exception as exc:
        return UndecodablePayload(raw, f"{type(exc).__name__}: {exc}")


def processing_record(job_id: str, blob: bytes, load_payload: Callable[[bytes], Any], load_error: Callable[[bytes], str]) -> Job:
    unpacker = msgpack.Unpacker(raw=True)
    unpacker.feed(blob)
    retry_count, perform_in, error, flat = list(unpacker)
    return Job(
        id=job_id,
        payloads=[(_tolerant(load_payload, flat[i]), float(flat[i + 1])) for i in range(0, len(flat), 2)],
        perform_in=float(perform_in),
        retry_count=int(retry_count),
        error=load_error(error) if error else None,
    )


def morgue_job(job_id: str, blob: bytes, updated_at: Any, error: bytes | None,
               load_payload: Callable[[bytes], Any], load_error: Callable[[bytes], str]) -> MorgueJob:
    return MorgueJob(
        id=job_id,
        payloads=payloads(blob, load_payload),
        updated_at=float(updated_at),
        error=load_error(error) if error else None,
    )
