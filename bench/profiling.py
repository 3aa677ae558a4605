"""Profiles that explain a missed target: py-spy on the server process, summarized as text.

py-spy samples the process from outside (``--nonblocking``: the target is
never paused) and only the thread holding the GIL (``--gil``): that is where
the server's Python CPU time goes. The raw collapsed stacks are kept in
``bench/out/`` (open them with any flame-graph tool) and summarized here as
the functions that hold the GIL longest, self and inclusive.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class Profile:
    path: str
    samples: int
    self_top: list[tuple[str, float]]        # (function, share of GIL samples)
    inclusive_top: list[tuple[str, float]]
    layers: list[tuple[str, float]]

    def markdown(self, limit: int = 12) -> str:
        if not self.samples:
            return f"py-spy recorded no samples of the server threads (`{self.path}`)."
        lines = [f"py-spy on the server threads, GIL-holding samples only ({self.samples} samples; "
                 f"raw stacks: `bench/out/{Path(self.path).name}`). Where the GIL time goes, by layer: "
                 + "; ".join(f"{k} {v:.0%}" for k, v in self.layers) + ".", "",
                 "| self (leaf function) | share | inclusive | share |", "| --- | ---: | --- | ---: |"]
        for i in range(min(limit, max(len(self.self_top), len(self.inclusive_top)))):
            s = self.self_top[i] if i < len(self.self_top) else ("", 0.0)
            c = self.inclusive_top[i] if i < len(self.inclusive_top) else ("", 0.0)
            lines.append(f"| `{s[0]}` | {s[1]:.1%} | `{c[0]}` | {c[1]:.1%} |" if s[0] else
                         f"| | | `{c[0]}` | {c[1]:.1%} |")
        return "\n".join(lines)


def _name(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    file = m.group("file")
    short = file
    for marker in ("site-packages/", "lib/python3"):
        if marker in file:
            short = file.split(marker, 1)[1]
            break
    short = short.removeprefix("/").split("/", 1)[-1] if short.startswith("/") else short
    return f"{m.group('func')} ({short})"


def _package(name: str) -> str:
    """Which layer a leaf frame belongs to, for the by-layer split."""
    where = name[name.rfind("(") + 1:-1]
    if where.startswith("redis/"):
        return "redis-py (commands, connection, pipeline, parser)"
    if where.startswith("lowkiq/store/"):
        return "lowkiq.store (scripts' arguments, replies into Jobs)"
    if where.startswith("lowkiq/"):
        return "lowkiq server loop (processor, shard handler, scheduler)"
    if "bench/apps" in where or where.startswith("apps/") or where.endswith("blank.py") or where.endswith("merging.py"):
        return "the app's perform"
    if where.startswith(("socket", "selectors", "ssl")):
        return "socket"
    if where.startswith(("threading", "queue.py", "_weakrefset")):
        return "threading"
    return "other stdlib / interpreter"


def summarize(path: str, within: str = "Processor.run") -> Profile:
    """Summarize stacks that pass through ``within`` (the server threads' loop; start-up is left out)."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames or not any(f.startswith(within + " ") for f in frames):
            continue
        n = int(count)
        total += n
        names = [_name(f) for f in frames]
        self_time[names[-1]] += n
        layers[_package(names[-1])] += n
        for name in set(names):
            inclusive[name] += n
    if not total:
        return Profile(path, 0, [], [], [])
    skip = ("Thread.", "_bootstrap", "<module>", "main (lowkiq/cli", f"{within} (")
    self_top = [(k, v / total) for k, v in self_time.most_common(15)]
    incl = [(k, v / total) for k, v in inclusive.most_common(60) if not k.startswith(skip)][:15]
    return Profile(path, total, self_top, incl, [(k, v / total) for k, v in layers.most_common()])


class SpyRecorder:
    """``py-spy record`` on a pid until ``stop()``; None-safe when py-spy is missing."""

    def __init__(self, pid: int, out: str, rate: int = 200) -> None:
        self.pid, self.out, self.rate = pid, out, rate
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> SpyRecorder:
        binary = py_spy()
        if binary is None:
            return self
        Path(self.out).parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, "record", "--pid", str(self.pid), "--format", "raw", "--output", self.out,
             "--rate", str(self.rate), "--gil", "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def stop(self) -> Profile | None:
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None
        if not Path(self.out).exists():
            print(f"  py-spy wrote nothing: {err.decode(errors='replace')[-300:]}", flush=True)
            return None
        return summarize(self.out)
