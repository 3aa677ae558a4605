"""Tables on the terminal, and bench/RESULTS.md."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from .common import ItemResult


def table(result: ItemResult) -> str:
    rows = [("metric", "measured", "target", "")] + [(r.metric, r.measured, r.target, r.verdict) for r in result.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"== {result.number}. {result.title}", f"   {result.setup}"]
    for n, row in enumerate(rows):
        lines.append("   " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("   " + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(result: ItemResult) -> str:
    lines = [f"## {result.number}. {result.title}", "", result.setup, "",
             "| metric | measured (median; all runs) | target | |", "| --- | --- | --- | --- |"]
    lines += [f"| {r.metric} | {r.measured} | {r.target} | {r.verdict} |" for r in result.rows]
    for note in result.notes:
        lines += ["", note]
    return "\n".join(lines)


def summary(results: Sequence[ItemResult]) -> str:
    lines = ["| item | target | measured | |", "| --- | --- | --- | --- |"]
    for result in results:
        for r in result.rows:
            if r.target:
                lines.append(f"| {result.number}. {r.metric} | {r.target} | {r.measured.split(' (')[0]} | {r.verdict} |")
    return "\n".join(lines)


def write(path: Path, results: Sequence[ItemResult], *, command: str, machine: dict[str, str],
          loads: dict[int, float], started: float, elapsed: float, runs: int, intro: str = "") -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Command: `{command}` (from the repository root, in a virtualenv made by `make install`).",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z', time.localtime(started))}; the whole run took {elapsed / 60:.1f} min.",
        f"- Machine: {machine['cores']} cores ({machine['cpu']}), {machine['memory']} RAM, Linux {machine['kernel']}.",
        f"- Redis {machine['redis']} (system `redis-server`, one private instance per item, `--save \"\" --appendonly no`, "
        "loopback TCP); Python " + machine["python"] + ".",
        f"- Packages: {machine['packages']}.",
        "- 1-minute load average before each item: " + ", ".join(f"item {k}: {v:.2f}" for k, v in loads.items()) + ".",
        f"- Timings are medians of {runs} runs (every run in parentheses) unless a row says otherwise.",
        "",
    ]
    if intro:
        lines += [intro.strip(), ""]
    lines += ["## Targets", "", summary(results), ""]
    for result in results:
        lines += [markdown(result), ""]
    path.write_text("\n".join(lines))
