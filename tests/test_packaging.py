"""The wheel holds lowkiq, lowkiq.webui with its templates and static files, and nothing else at top level."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contents(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("lowkiq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"lowkiq"}
    assert "lowkiq/__init__.py" in names
    assert "lowkiq/queue/scripts/push.lua" in names
    assert "lowkiq/webui/__init__.py" in names
    assert any(n.startswith("lowkiq/webui/templates/lowkiq/") and n.endswith(".html") for n in names)
    assert any(n.startswith("lowkiq/webui/static/") and n.endswith("htmx.min.js") for n in names)
    assert not any(n.startswith(("tests/", "bench/", "webui/", "templates/", "static/")) for n in names)
