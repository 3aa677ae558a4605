"""The README is a page and docs/ is the manual: the README stays short and links every page of docs/,
every page has a title, and every relative link and anchor of the README and docs/ leads somewhere.

Anchors are checked as GitHub makes them from a heading: its text as rendered (no backticks, no link
targets), lowercased, every character but letters, digits, '_', '-' and spaces dropped, spaces turned
into '-', and '-1', '-2'... added to a repeated one.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from docs_support import DOCS, README, ROOT, headings, pages

MAX_README_LINES = 300
# [text](target) or [text](target "title"), images included; <img src="..."> and <a href="...">.
MARKDOWN_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:img|a)\b[^>]*\b(?:src|href)=\"([^\"]+)\"", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto: ...


def slug(title: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path.read_text()):
        base = slug(heading.title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code, where a link is only text."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"(`+)(?:(?!\1).)+\1", "", text, flags=re.S)


def links(path: Path) -> list[str]:
    text = prose(path.read_text())
    return [*MARKDOWN_LINK.findall(text), *HTML_LINK.findall(text)]


def test_slugs_are_githubs():
    assert slug("Fencing your own writes: `lowkiq.context()`") == "fencing-your-own-writes-lowkiqcontext"
    assert slug("Prometheus: the console's `metrics` route") == "prometheus-the-consoles-metrics-route"
    assert slug("A server's own metrics") == "a-servers-own-metrics"
    assert slug("Jobs, merge rules, retries and the morgue") == "jobs-merge-rules-retries-and-the-morgue"
    assert slug("Running it: standalone or mounted") == "running-it-standalone-or-mounted"
    assert slug("LOWKIQ_WEB_* settings") == "lowkiq_web_-settings"


def test_the_readme_is_a_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move a topic to docs/"
    titles = [h.title for h in headings(README.read_text()) if h.level == 2]
    for expected in ("Why", "Quickstart"):
        assert expected in titles, titles


def test_the_readme_links_every_page_of_the_docs_and_each_exists():
    linked = {(README.parent / target.split("#")[0]).resolve()
              for target in links(README) if not EXTERNAL.match(target) and target.split("#")[0].endswith(".md")}
    docs = {p.resolve() for p in DOCS.glob("*.md")}
    assert docs, "docs/ holds no page"
    assert not docs - linked, f"pages of docs/ the README does not link: {sorted(p.name for p in docs - linked)}"
    missing = {p for p in linked if not p.exists()}
    assert not missing, f"the README links pages that do not exist: {sorted(map(str, missing))}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_every_page_has_a_title_and_an_introduction(page: Path):
    text = page.read_text()
    first = headings(text)[0]
    assert first.level == 1 and first.line == 0, f"{page.name} does not open with a title"
    intro = text.split("\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
    assert intro.strip() and not intro.startswith(("#", "```", "|", "- ")), f"{page.name} has no introduction"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path):
    broken = []
    for target in links(page):
        if EXTERNAL.match(target) or target.startswith("//"):
            continue
        path_part, _, anchor = target.partition("#")
        path_part = unquote(path_part.split("?")[0])
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            broken.append(f"{target}: no heading makes #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_docs_keep_the_screenshots():
    shown = {Path(target).name for page in pages() for target in links(page) if target.endswith(".png")}
    assert {p.name for p in DOCS.glob("*.png")} <= shown
