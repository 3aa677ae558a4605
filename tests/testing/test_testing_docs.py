"""docs/testing.md run as written: its Python blocks, each starting with ``# name.py``, are written to a
folder where pytest runs them, the plugin found through its entry point."""

from __future__ import annotations

import re

import pytest
from docs_support import DOCS, code_blocks
from testing_support import run_pytest

PAGE = DOCS / "testing.md"

pytestmark = pytest.mark.slow  # a pytest run of its own


def test_the_testing_page_runs_as_written(tmp_path):
    blocks = code_blocks(PAGE.read_text())
    assert blocks and all(language == "python" for language, _ in blocks), [lang for lang, _ in blocks]
    tests = 0
    for _, code in blocks:
        name = re.fullmatch(r"# (\S+\.py)", code.splitlines()[0])
        assert name, f"a block of docs/testing.md names no file:\n{code}"
        (tmp_path / name.group(1)).write_text(code)
        tests += len(re.findall(r"^def test_", code, re.M))
    assert tests >= 6
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tests} passed" in done.stdout, done.stdout
    # app.py names no Redis URL: no test reached for the embedded one (inline needs none, drain had the fixture's)
    assert not (tmp_path / ".lowkiq").exists()
