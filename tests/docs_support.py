"""The documentation as the tests read it: README.md (the front page) and the manual, docs/*.md.

A test of shown commands or code finds them by the heading they sit under (``section``), on the page
that holds them, so a section can move between pages without the test losing it silently: a heading
found on no page, or on two, fails the test that asked for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README, then every page of docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


@dataclass(frozen=True)
class Heading:
    line: int  # index in the page's lines
    level: int
    title: str  # as written, with its Markdown (`code`, links)


def headings(text: str) -> list[Heading]:
    """The page's ATX headings, outside fenced code blocks (``# app.py`` in a Python block is code)."""
    found, fence = [], None
    for index, line in enumerate(text.split("\n")):
        marker = re.match(r"\s*(```+|~~~+)", line)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        heading = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if fence is None and heading:
            found.append(Heading(index, len(heading.group(1)), heading.group(2)))
    return found


def section(title: str, page: Path | None = None) -> str:
    """The text under the heading ``title`` (any level), up to the next heading of the same or a higher level.

    Searched on ``page``, else on every page, where it must be found exactly once.
    """
    searched = [page] if page else pages()
    found = [(p, h) for p in searched for h in headings(p.read_text()) if h.title == title]
    where = ", ".join(str(p.relative_to(ROOT)) for p in searched)
    assert len(found) == 1, f"the heading {title!r} is on {len(found)} pages or places of {where}, not one"
    path, heading = found[0]
    lines = path.read_text().split("\n")
    end = next((h.line for h in headings(path.read_text()) if h.line > heading.line and h.level <= heading.level),
               len(lines))
    return "\n".join(lines[heading.line + 1:end])


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block with a language."""
    return re.findall(r"```(\w+)\n(.*?)```", text, re.S)
