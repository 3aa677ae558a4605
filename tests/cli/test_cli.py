"""The `lowkiq` command's help and its one-line errors (exit 2, no traceback)."""

from __future__ import annotations

import pytest
from cli_support import one_line_error
from redis_server import free_port
from server_support import APP, APPS, run_cli

pytestmark = pytest.mark.slow


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


def test_a_syntax_error_in_the_app_is_shown_as_python_shows_it(tmp_path):
    (tmp_path / "app.py").write_text("import lowkiq\n\n\nclass Orders(lowkiq.Worker)\n    pass\n")
    result = run_cli(tmp_path, "-r", "app.py")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "lowkiq: app.py raised while loading:",
        f'  File "{tmp_path / "app.py"}", line 4',
        "    class Orders(lowkiq.Worker)",
        "                               ^",
        "SyntaxError: expected ':'",
    ]


def test_an_error_at_import_keeps_the_traceback_of_the_app_s_own_code(tmp_path):
    (tmp_path / "settings.py").write_text("import json\n\nTOKEN = json.loads('{')\n")
    (tmp_path / "app.py").write_text("import lowkiq\nimport settings\n")
    lines = run_cli(tmp_path, "-r", "app.py").stderr.splitlines()
    assert lines[:6] == [
        "lowkiq: app.py raised while loading:",
        "Traceback (most recent call last):",
        f'  File "{tmp_path / "app.py"}", line 2, in <module>',
        "    import settings",
        f'  File "{tmp_path / "settings.py"}", line 3, in <module>',
        "    TOKEN = json.loads('{')",
    ]
    assert lines[-1].startswith("json.decoder.JSONDecodeError: Expecting property name")
    assert not any("app_file.py" in line or "importlib" in line for line in lines)  # the loader's frames


def test_a_worker_without_perform_is_refused_naming_it(tmp_path):
    (tmp_path / "app.py").write_text(
        "import lowkiq\n\n\nclass Orders(lowkiq.Worker):\n    shards_count = 4\n\n\nlowkiq.configure(workers=[Orders])\n")
    line = one_line_error(run_cli(tmp_path, "-r", "app.py"))
    assert line == ("lowkiq: app.py, line 8: Orders has no perform method: define perform(self, payloads_by_id) in "
                    "it (without one, a server would fail each of its jobs and retry it for about 20 days)")


def test_python_m_lowkiq_is_the_lowkiq_command():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "lowkiq", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: lowkiq ") and "-r APP.py" in out.stdout
