"""arq's own virtualenv: arq 0.28.0, the latest, requires redis<6 and lowkiq requires redis>=6.

So arq cannot be a pin of setup.cfg's ``bench`` extra; its worker and its
producer run under bench/out/arq-venv (git-ignored), built on first use with
these pins and rebuilt when they change.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .. import ROOT

PINS = ("arq==0.28.0", "redis==5.3.1", "hiredis==3.5.0")
VENV = Path(ROOT) / "bench" / "out" / "arq-venv"


def python() -> str:
    """The venv's interpreter, built if missing or pinned differently."""
    marker = VENV / "bench-pins.txt"
    executable = VENV / "bin" / "python"
    wanted = "\n".join(PINS) + "\n"
    if executable.exists() and marker.exists() and marker.read_text() == wanted:
        return str(executable)
    shutil.rmtree(VENV, ignore_errors=True)
    # The base interpreter, not the bench's venv: a venv made from a venv's python still works, but
    # this keeps the two independent.
    base = getattr(sys, "_base_executable", sys.executable)
    # Without PYTHONPATH: the repository root on it would show pip this checkout's lowkiq and its requirements.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for command in ([base, "-m", "venv", str(VENV)],
                    [str(executable), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PINS]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"building arq's virtualenv failed: {shlex.join(command)}\n{done.stderr[-3000:]}")
    marker.write_text(wanted)
    return str(executable)
