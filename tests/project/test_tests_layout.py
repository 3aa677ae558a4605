"""The tests' own layout (docs/development.md, "Where things are"): one folder per part of the product, support
modules in tests/ itself, file names unique across folders, and no test file importing one of another folder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FOLDERS = {"store", "server", "console", "webui", "browser", "cli", "transport", "testing", "schedule", "core",
           "guarantees", "examples", "bench", "project"}
NOT_TESTS = {"apps", "__pycache__"}


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_is_in_the_folder_of_a_part_and_only_support_modules_are_at_the_root():
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(".")} - NOT_TESTS
    assert folders == FOLDERS
    assert all(p.parent.parent == TESTS and p.parent.name in FOLDERS
               for p in all_test_files() if NOT_TESTS.isdisjoint(p.relative_to(TESTS).parts))
    assert not list(TESTS.rglob("__init__.py")), "pytest imports the tests by their names: no packages"


def test_test_file_names_are_unique_across_folders():
    names = [p.name for p in all_test_files() if p.parent.name in FOLDERS]
    assert len(names) > 100
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_no_test_file_imports_a_test_file_of_another_folder():
    folder_of = {p.stem: p.parent.name for p in all_test_files() if p.parent.name in FOLDERS}
    crossing = []
    for path in all_test_files():
        if path.parent.name not in FOLDERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            crossing += [f"{path.relative_to(TESTS)} imports {n}" for n in names
                         if n in folder_of and folder_of[n] != path.parent.name]
    assert crossing == []


def test_the_support_modules_import_no_test_file():
    for path in sorted(TESTS.glob("*.py")):
        assert not re.search(r"^\s*(from|import) test_", path.read_text(), re.M), path.name
