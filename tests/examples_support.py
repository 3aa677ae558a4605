"""Helpers of the examples' tests: where the examples are, and importing one as its users run it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def on_path(example: str) -> Path:
    """Put an example's folder first on sys.path, as running it from there does; its folder."""
    folder = EXAMPLES / example
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return folder


def links(html: str) -> list[str]:
    """Every link, asset and form target of a page."""
    found = re.findall(r'(?:href|src|action|hx-get|formaction)="([^"]+)"', html)
    return [link for link in found if not link.startswith("data:")]


def csrf_token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token on the page"
    return match.group(1)
