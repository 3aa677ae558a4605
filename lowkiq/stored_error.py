"""A failure as Redis stores it: the error (``dump_error``'s bytes) and, beside it, the traceback.

Both travel in the one value the scripts already move with a job (queue, processing,
morgue), so a traceback follows its job everywhere without a second key. A value with
no traceback (``traceback_limit = 0``, or written by an earlier version) is the error's
bytes alone, and still reads as it always did.
"""

from __future__ import annotations

import traceback as tb
from collections.abc import Callable

# No dump_error output starts with a NUL and this text; a length prefix splits the two parts.
MARK = b"\x00lowkiq:traceback\x00"
LENGTH_BYTES = 4
# Of a traceback longer than the limit, the head (what was called) and the tail (where it raised) stay.
HEAD_SHARE = 0.25


def pack(error: bytes, traceback: str) -> bytes:
    """The stored value: ``error`` alone when there is no traceback."""
    if not traceback:
        return error
    return MARK + len(error).to_bytes(LENGTH_BYTES, "big") + error + traceback.encode("utf-8", "replace")


def unpack(raw: bytes) -> tuple[bytes, str | None]:
    """(the error's bytes, the traceback or None) of a stored value."""
    if not raw.startswith(MARK):
        return raw, None
    start = len(MARK) + LENGTH_BYTES
    size = int.from_bytes(raw[len(MARK):start], "big")
    if start + size > len(raw):  # not written by pack: show it whole as the error
        return raw, None
    return raw[start:start + size], raw[start + size:].decode("utf-8", "replace")


def load(raw: bytes | None, load_error: Callable[[bytes], str]) -> tuple[str | None, str | None]:
    """(error text, traceback) of a stored value, or (None, None) when there is none."""
    if not raw:
        return None, None
    error, traceback = unpack(raw)
    return load_error(error), traceback


def format_traceback(exc: BaseException, limit: int) -> str:
    """The exception's traceback (chained causes included), at most ``limit`` characters; "" when 0."""
    if limit <= 0:
        return ""
    text = "".join(tb.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) <= limit:
        return text
    head = int(limit * HEAD_SHARE)
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n... {left_out:,} characters left out ...\n{text[-tail:]}"
