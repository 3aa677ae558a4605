"""Dates operators type as bounds, read alike on every Python lowkiq supports.

Python 3.11's ``datetime.fromisoformat`` reads ISO 8601 as the console documents it (``Z``, a decimal
comma, a fraction of any length, an offset without a colon or minutes); 3.10's reads only what
``isoformat()`` writes. On 3.10 those forms are rewritten into it first.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime

_ISO = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
                  r"(Z|[+-]\d{2}(?::?\d{2})?)?)?")


def from_iso(text: str) -> datetime:
    """``datetime.fromisoformat`` as Python 3.11 reads it; ValueError for what is not a date."""
    if sys.version_info >= (3, 11):
        return datetime.fromisoformat(text)
    match = _ISO.fullmatch(text)
    if match is None or match[2] is None:
        return datetime.fromisoformat(text)  # a bare date, or 3.10's own error
    date, hours, minutes, seconds, fraction, zone = match.groups()
    if zone == "Z":
        zone = "+00:00"
    elif zone:
        zone = f"{zone[:3]}:{zone[-2:] if len(zone) > 3 else '00'}"
    fraction = f".{fraction[:6].ljust(6, '0')}" if fraction else ""  # 3.11 drops digits past microseconds
    return datetime.fromisoformat(f"{date}T{hours}:{minutes or '00'}:{seconds or '00'}{fraction}{zone or ''}")
