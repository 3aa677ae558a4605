"""The machine a result was measured on, and waiting for it to be quiet."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

from .common import log


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_quiet(threshold: float, budget: float) -> float:
    """Wait (at most ``budget`` seconds) for the 1-minute load to drop below ``threshold``; returns it."""
    deadline = time.monotonic() + budget
    load = load1()
    if load >= threshold and budget > 0:
        log(f"1-minute load {load:.2f} >= {threshold}: waiting up to {budget:.0f} s for the machine to calm down")
    while load >= threshold and time.monotonic() < deadline:
        time.sleep(10)
        load = load1()
    return load


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip()


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("lowkiq", "redis", "hiredis", "msgpack", "rq", "dramatiq", "saq", "streaq", "coredis", "arq", "taskiq",
                 "taskiq-redis", "flask", "gunicorn", "prometheus-client"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "-"
    # arq runs in a virtualenv of its own (bench/peers/arq_env.py): its pin is what runs.
    from .peers.arq_env import PINS

    found["arq"] = next(pin.split("==")[1] for pin in PINS if pin.startswith("arq=="))
    return found


def describe() -> dict[str, str]:
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu_model(),
        "memory": f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
        "redis": redis_version(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "packages": ", ".join(f"{k} {v}" for k, v in versions().items()),
    }
