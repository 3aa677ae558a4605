"""The `lowkiq` command's help and its one-line errors (exit 2, no traceback)."""

from __future__ import annotations

import pytest
from redis_server import free_port
from server_support import APP, APPS, run_cli

pytestmark = pytest.mark.slow


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lowkiq: ")
    return lines[0]


def test_help_shows_the_options(tmp_path):
    result = run_cli(tmp_path, "--help")
    assert result.returncode == 0
    for option in ("-r", "--threads", "--nodes", "--node-number", "--scheduler", "--log-level", "--redis-url",
                   "--stop-embedded", "SIGTTIN"):
        assert option in result.stdout


def test_missing_app_file(tmp_path):
    assert "nope.py: no such file" in one_line_error(run_cli(tmp_path, "-r", "nope.py"))


def test_no_app_given(tmp_path):
    assert "-r ./path_to_app.py" in one_line_error(run_cli(tmp_path))


def test_app_configuring_no_workers(tmp_path):
    assert "configures no workers" in one_line_error(run_cli(tmp_path, "-r", str(APPS / "no_workers.py")))


def test_app_never_configuring_lowkiq(tmp_path):
    assert "does not configure lowkiq" in one_line_error(run_cli(tmp_path, "-r", str(APPS / "not_configured.py")))


def test_unreachable_redis(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    line = one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", url, env={"APP_RECORD_DIR": str(tmp_path)}))
    assert f"cannot reach Redis at {url}" in line


def test_invalid_node_number(tmp_path, redis_url):
    result = run_cli(tmp_path, "-r", str(APP), "--nodes", "2", "--node-number", "2", "--redis-url", redis_url)
    assert "node_number must be in 0..1" in one_line_error(result)


def test_stop_embedded_when_none_runs(tmp_path):
    result = run_cli(tmp_path, "--stop-embedded")
    assert result.returncode == 0 and "no embedded Redis" in result.stdout
