"""Command-line options shared by the items."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    profile: str = "auto"     # auto: profile where a target is missed; always; never
    console_http: bool = True  # item 6 over HTTP through gunicorn as well as in-process
