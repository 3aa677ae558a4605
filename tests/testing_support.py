"""A user's own test suite, run by pytest in a folder of its own, where lowkiq's plugin is found as a user
finds it: through its entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Whatever would make the inner run differ from a user's: this suite's options, plugins and Redis.
DROPPED = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_XDIST_WORKER",
           "PYTEST_CURRENT_TEST", "LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP", "LOWKIQ_EMBEDDED_DIR", "PYTHONPATH")


def run_pytest(folder: Path, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in DROPPED}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          env={**base, **(env or {})}, capture_output=True, text=True, timeout=timeout)
