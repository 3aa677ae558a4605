"""docs/integrations.md quotes the examples: each block headed by a file's path (``# examples/...``) shows
lines of that file, in its order and exactly as written, ``...`` standing for lines left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import DOCS, ROOT, code_blocks

PAGE = DOCS / "integrations.md"


def quotes() -> list[tuple[Path, list[str]]]:
    found = []
    for _language, code in code_blocks(PAGE.read_text()):
        first, _, rest = code.partition("\n")
        if first.startswith("# examples/"):
            found.append((ROOT / first.removeprefix("# "), rest.rstrip("\n").split("\n")))
    return found


def test_every_example_is_quoted() -> None:
    quoted = {path.relative_to(ROOT).parts[1] for path, _ in quotes()}
    assert quoted == {"flask_app", "fastapi_app", "django_project", "docker"}


@pytest.mark.parametrize(("path", "lines"), quotes(), ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else "")
def test_a_quote_shows_its_files_lines_in_order(path: Path, lines: list[str]) -> None:
    assert path.is_file(), f"{PAGE.name} quotes {path.relative_to(ROOT)}, which does not exist"
    remaining = iter(path.read_text().split("\n"))
    for line in lines:
        if line.strip() == "...":
            continue
        assert any(line.rstrip() == candidate.rstrip() for candidate in remaining), \
            f"{PAGE.name}: {line!r} is not in {path.relative_to(ROOT)} (or not in this order)"
