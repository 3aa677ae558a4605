"""Two versions of lowkiq side by side: the previous one from a ``git worktree``, imported through PYTHONPATH.

The previous version is the parent of the commit that brought integer microsecond scores (the commit that
added scores_migrate.lua), as ``bench/versus.py`` runs two versions. Its servers and producers run the
same app (tests/apps/upgrade_app.py) as this tree's, in subprocesses of this interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from server_support import APPS, FAST_LEASES, ServerProcess

ROOT = Path(__file__).resolve().parent.parent
APP = APPS / "upgrade_app.py"
PRODUCER = APPS / "upgrade_producer.py"
# The ``lowkiq`` console script's entry point, run by this interpreter with a side's PYTHONPATH.
LOWKIQ = "import sys; from lowkiq.cli import main; sys.argv[0] = 'lowkiq'; sys.exit(main())"


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def previous_rev() -> str:
    """The commit before integer microsecond scores; the test is skipped outside a git checkout."""
    found = _git("log", "-1", "--diff-filter=A", "--format=%H", "--", "lowkiq/store/scripts/scores_migrate.lua")
    if found.returncode != 0 or not found.stdout.strip():
        pytest.skip("needs the git history that holds the previous version")
    return found.stdout.strip() + "^"


@contextmanager
def previous_tree(tmp: Path) -> Iterator[Path]:
    """The previous version checked out in ``tmp``, removed afterwards."""
    folder = tmp / "previous"
    added = _git("worktree", "add", "--detach", str(folder), previous_rev())
    assert added.returncode == 0, added.stderr
    try:
        yield folder
    finally:
        if _git("worktree", "remove", "--force", str(folder)).returncode != 0:
            _git("worktree", "prune")


@dataclass(frozen=True)
class Side:
    """One version: the folder its ``lowkiq`` package is imported from."""

    name: str
    tree: Path

    def env(self, redis_url: str, records: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "LOWKIQ_REDIS_URL")}
        return {**env, **FAST_LEASES, "PYTHONPATH": str(self.tree), "LOWKIQ_REDIS_URL": redis_url,
                "APP_RECORD_DIR": str(records), "UPGRADE_SIDE": self.name}

    def server(self, tmp: Path, redis_url: str, **env: str) -> ServerProcess:
        records = tmp / "records"
        records.mkdir(exist_ok=True)
        log_path = tmp / f"server-{self.name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen([sys.executable, "-c", LOWKIQ, "-r", str(APP)], cwd=tmp,
                                       env={**self.env(redis_url, records), **env}, stdout=log,
                                       stderr=subprocess.STDOUT)
        return ServerProcess(process, log_path)

    def producer(self, tmp: Path, redis_url: str, prefix: str, count: int, seconds: float, later: float,
                 kill: int = 0) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(PRODUCER), redis_url, prefix, str(count), str(seconds),
                                 str(later), str(kill)], cwd=tmp, env=self.env(redis_url, tmp),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def produced(self, process: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
        """What a producer enqueued (its JSON line), checked to come from this side's tree."""
        out, err = process.communicate(timeout=timeout)
        assert process.returncode == 0, err[-3000:]
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        assert Path(result["lowkiq"]).resolve().is_relative_to(self.tree.resolve()), result["lowkiq"]
        return result


def performed(tmp: Path) -> list[dict[str, Any]]:
    """Every payload performed so far, by either side."""
    out = []
    for path in (tmp / "records").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                if entry.get("kind") == "perform":
                    out.append(entry)
    return out
