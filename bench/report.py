"""Tables on the terminal, and bench/RESULTS.md.

Each item of a full run is saved as ``bench/results/item-<n>.json`` with
when, where and on which commit it was measured; RESULTS.md is composed
from the latest saved result of every item, so ``--only 6`` refreshes
item 6 and keeps the others.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import ROOT
from .common import ItemResult, Row

ANALYSIS = Path(__file__).resolve().parent / "ANALYSIS.md"
# Sections written by hand from benchmarks run on their own (python -m bench.<name>), after the items.
STANDALONE = Path(__file__).resolve().parent / "STANDALONE.md"


def table(result: ItemResult) -> str:
    rows = [("metric", "measured", "target", "")] + [(r.metric, r.measured, r.target, r.verdict) for r in result.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"== {result.number}. {result.title}", f"   {result.setup}"]
    for n, row in enumerate(rows):
        lines.append("   " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("   " + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def commit() -> str:
    """The commit measured, with ``+dirty`` when the working tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def save(folder: Path, result: ItemResult, meta: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"item-{result.number}.json").write_text(json.dumps({"meta": meta, "result": asdict(result)}, indent=1))


def load(folder: Path) -> list[tuple[ItemResult, dict[str, Any]]]:
    items = []
    for path in sorted(folder.glob("item-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        data = json.loads(path.read_text())
        r = data["result"]
        rows = [Row(**row) for row in r.pop("rows")]
        items.append((ItemResult(**r, rows=rows), data["meta"]))
    return items


def markdown(result: ItemResult, meta: dict[str, Any]) -> str:
    lines = [f"## {result.number}. {result.title}", "", result.setup, "",
             f"Measured {meta['date']} on commit `{meta['commit']}`, 1-minute load {meta['load']:.2f} before the "
             f"item, {meta['runs']} run(s), {meta['seconds']:.0f} s (`{meta['command']}`).", "",
             "| metric | measured (median; every run) | target | |", "| --- | --- | --- | --- |"]
    lines += [f"| {r.metric} | {r.measured} | {r.target} | {r.verdict} |" for r in result.rows]
    for note in result.notes:
        lines += ["", note]
    return "\n".join(lines)


def summary(items: Sequence[tuple[ItemResult, dict[str, Any]]]) -> str:
    lines = ["| item | target | measured | |", "| --- | --- | --- | --- |"]
    for result, _ in items:
        for r in result.rows:
            if r.target:
                lines.append(f"| {result.number}. {r.metric} | {r.target} | {r.measured.split(' (')[0]} | {r.verdict} |")
    return "\n".join(lines)


def machine_line(machine: dict[str, str]) -> str:
    return f"{machine['cores']} cores ({machine['cpu']}), {machine['memory']} RAM, Linux {machine['kernel']}"


def machines(items: Sequence[tuple[ItemResult, dict[str, Any]]], machine: dict[str, str]) -> str:
    """The machine each item ran on (saved with it), or this one's for an item saved without it."""
    by_machine: dict[str, list[int]] = {}
    for result, meta in items:
        by_machine.setdefault(meta.get("machine") or machine_line(machine), []).append(result.number)
    if len(by_machine) <= 1:
        return next(iter(by_machine), machine_line(machine))
    return "; ".join(f"{line} (items {', '.join(map(str, numbers))})" for line, numbers in by_machine.items())


def write(path: Path, items: Sequence[tuple[ItemResult, dict[str, Any]]], machine: dict[str, str]) -> None:
    lines = [
        "# Benchmark results",
        "",
        "Command: `python -m bench.run` from the repository root, in the virtualenv `make install` builds "
        "(`make bench`); `--only 1,2` runs some items and refreshes only their sections here. Every item starts "
        "its own `redis-server` and runs `lowkiq -r bench/apps/<app>.py` as a real process.",
        "",
        f"- Machine: {machines(items, machine)}; other work was running on it at times (the load before each item "
        "is given).",
        f"- Redis {machine['redis']} (system `redis-server`, private instance, `--save \"\" --appendonly no`, "
        f"loopback TCP); Python {machine['python']}.",
        f"- Packages: {machine['packages']}.",
        "- Timings are medians of the runs listed in parentheses; targets are issue 5's, and issue 14's where it "
        "raised them (enqueue, CPU per job, memory, merging, item 11).",
        "",
        "## Targets",
        "",
        summary(items),
        "",
    ]
    if ANALYSIS.exists():
        lines += [ANALYSIS.read_text().strip(), ""]
    for result, meta in items:
        lines += [markdown(result, meta), ""]
    if STANDALONE.exists():
        lines += [STANDALONE.read_text().strip(), ""]
    path.write_text("\n".join(lines))


def meta(*, load: float, runs: int, seconds: float, command: str, machine: dict[str, str]) -> dict[str, Any]:
    return {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": commit(), "load": load, "runs": runs,
            "seconds": seconds, "command": command, "machine": machine_line(machine)}
