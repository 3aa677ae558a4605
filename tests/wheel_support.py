"""lowkiq built as a wheel and installed outside the source tree, as a user gets it."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


@functools.cache
def wheel() -> Path:
    """The wheel of the working tree, built once per test session."""
    out = Path(tempfile.mkdtemp(prefix="lowkiq-wheel-"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True, cwd=out, capture_output=True,
    )
    (built,) = out.glob("lowkiq-*.whl")
    return built


@functools.cache
def installed() -> Path:
    """The wheel installed into a folder of its own (its dependencies come from the test virtualenv)."""
    target = Path(tempfile.mkdtemp(prefix="lowkiq-site-"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(target), str(wheel())],
        check=True, capture_output=True,
    )
    return target


def installed_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment where ``python``, ``lowkiq`` and gunicorn run the installed wheel, not the source tree.

    The folder comes first on PYTHONPATH, so it wins over the editable install of the
    virtualenv; its bin/ (the wheel's console scripts) comes first on PATH.
    """
    target = installed()
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(target)
    env["PATH"] = os.pathsep.join([str(target / "bin"), str(VENV_BIN), env.get("PATH", "")])
    return env
