"""How payloads and errors become bytes in Redis, and back.

Payloads default to canonical JSON (sorted keys, compact) so that equal
payloads are equal bytes, and so merge as equal members of a job's set.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

DumpPayload = Callable[[Any], "bytes | str"]
LoadPayload = Callable[[bytes], Any]
FormatError = Callable[[BaseException], str]
DumpError = Callable[[str], "bytes | str"]
LoadError = Callable[[bytes], str]


# Built once: json.dumps with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dump_json(payload: Any) -> bytes:
    return _CANONICAL.encode(payload).encode()


_DECODE = json.JSONDecoder().decode


def load_json(data: bytes) -> Any:
    # dump_json writes UTF-8: decoded as such, the text goes straight to a decoder built once. json.loads would
    # first guess the encoding of the bytes, in Python, on every payload a server takes (the UTF-16 and BOM cases
    # it guesses go to it as before).
    try:
        text = data.decode() if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        return json.loads(data)
    if not isinstance(text, str) or text.startswith("\ufeff"):
        return json.loads(data)
    return _DECODE(text)


def dump_pickle(payload: Any) -> bytes:
    """Opt-in only: a pickle in Redis runs code when loaded, so trust every writer."""
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def load_pickle(data: bytes) -> Any:
    return pickle.loads(data)


def format_error(exc: BaseException) -> str:
    """The class and the message, so that a bare ``KeyError('x')`` reads ``KeyError: 'x'``."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def dump_error(error: str) -> bytes:
    return error.encode("utf-8", "replace")


def load_error(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def to_bytes(value: bytes | str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"a serializer must return bytes or str, got {type(value).__name__}")
