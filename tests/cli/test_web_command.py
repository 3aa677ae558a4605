"""`lowkiq web`: the standalone console under gunicorn, its defaults, what it prints, its signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from redis_server import free_port
from server_support import lowkiq_bin
from web_command_support import get, start

import lowkiq
from lowkiq import connection
from lowkiq.cli import web as web_command
from lowkiq.store import registry

APP = textwrap.dedent('''
    import lowkiq


    class Invoices(lowkiq.Worker):
        def perform(self, payloads_by_id):
            pass


    lowkiq.configure(workers=[Invoices])
''')


def plan(capsys, *argv: str, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str], list[str]]:
    command, environ = web_command.plan(web_command.parser().parse_args(list(argv)), dict(env or {}))
    return command, environ, capsys.readouterr().out.splitlines()


def test_defaults(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command, env, out = plan(capsys)
    workers = str(min(4, os.cpu_count() or 1))
    assert command[-7:] == ["--bind", "127.0.0.1:5000", "--workers", workers, "--threads", "4",
                            "lowkiq.webui:served_app()"]
    assert command[1:3] == ["-m", "gunicorn"]
    assert out[0].startswith("lowkiq console: http://127.0.0.1:5000/")
    assert out[1] == "watching Redis: embedded at ./.lowkiq"
    assert not (tmp_path / ".lowkiq").exists()  # the console's processes start it, not this one


def test_the_redis_it_watches_is_printed_without_its_password(capsys):
    _, env, out = plan(capsys, "--redis-url", "redis://ops:s3cret@cache.internal:6380/2")
    assert env["LOWKIQ_REDIS_URL"] == "redis://ops:s3cret@cache.internal:6380/2"
    assert out[1] == "watching Redis: redis://cache.internal:6380/2"
    _, _, out = plan(capsys, env={"REDIS_URL": "redis://:s3cret@10.0.0.5"})
    assert out[1] == "watching Redis: redis://10.0.0.5:6379/0"
    assert "s3cret" not in "".join(out)


def test_gunicorn_cmd_args_fill_what_is_not_given(capsys):
    command, _, out = plan(capsys, "--threads", "2", env={"GUNICORN_CMD_ARGS": "--bind 0.0.0.0:8000 -w 3 --timeout 60"})
    assert command[-3:] == ["--threads", "2", "lowkiq.webui:served_app()"]
    assert "--bind" not in command and "--workers" not in command
    assert out[0] == "lowkiq console: http://0.0.0.0:8000/  (3 workers x 2 threads)"
    command, _, _ = plan(capsys, "--bind", "127.0.0.1:9000", env={"GUNICORN_CMD_ARGS": "--bind 0.0.0.0:8000"})
    assert command[command.index("--bind") + 1] == "127.0.0.1:9000"


def test_the_app_is_passed_on_and_its_redis_is_the_one_shown(capsys, tmp_path):
    (tmp_path / "app.py").write_text(APP)
    _, env, out = plan(capsys, "--app", str(tmp_path / "app.py"), env={"LOWKIQ_REDIS_URL": "redis://db.example:6379/1"})
    assert env["LOWKIQ_APP"] == str(tmp_path / "app.py")
    assert out[1] == "watching Redis: redis://db.example:6379/1"
    _, _, out = plan(capsys, "--app", str(tmp_path / "app.py"))
    assert out[1] == f"watching Redis: embedded at {tmp_path / '.lowkiq'}"


def test_redis_url_wins_over_the_redis_the_app_configures(capsys, tmp_path, redis_url):
    (tmp_path / "app.py").write_text(APP.replace("configure(workers=[Invoices])",
                                                 "configure(workers=[Invoices], redis_url='redis://127.0.0.1:1/0')"))
    _, env, out = plan(capsys, "--app", str(tmp_path / "app.py"), "--redis-url", redis_url)
    assert env["LOWKIQ_WEB_REDIS_URL"] == redis_url and out[1] == f"watching Redis: {redis_url}"
    # What each gunicorn worker builds from that environment watches the given Redis, not the app's.
    from lowkiq.webui import create_app

    stats = create_app(environ=env).test_client().get("/api/v1/stats")  # the app's Redis (port 1) would be a 503
    assert stats.status_code == 200 and set(stats.get_json()["by_worker"]) == {"Invoices"}


def test_usage_errors_are_one_line(capsys, tmp_path):
    assert web_command.main(["--app", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"lowkiq web: {tmp_path / 'missing.py'}: no such file (the app that calls lowkiq.configure(workers=[...]))")


def as_python_shows(script: Path) -> list[str]:
    """What python prints when the script it runs raises: its own wording and carets, whichever Python this is."""
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHON_COLORS": "0"})
    return done.stderr.splitlines()


def test_an_error_in_the_app_is_shown_as_python_shows_it_before_any_banner(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import lowkiq\n\n\ndef connect():\n    raise RuntimeError('no database')\n\n\nconnect()\n")
    assert web_command.main(["--app", str(broken)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing is served
    assert err.splitlines() == [f"lowkiq web: {broken} raised while loading:", *as_python_shows(broken)]
    # The app's own frames, none of the loader's (Python 3.13 adds lines of carets under the calls).
    assert [line for line in err.splitlines() if line.strip(" ~^")] == [
        f"lowkiq web: {broken} raised while loading:",
        "Traceback (most recent call last):",
        f'  File "{broken}", line 8, in <module>',
        "    connect()",
        f'  File "{broken}", line 5, in connect',
        "    raise RuntimeError('no database')",
        "RuntimeError: no database",
    ]
    broken.write_text("import lowkiq\n\nclass Invoices(lowkiq.Worker)\n    pass\n")
    assert web_command.main(["--app", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[1:] == as_python_shows(broken)
    assert err.splitlines()[1:] == [f'  File "{broken}", line 3', "    class Invoices(lowkiq.Worker)",
                                    "                                 ^", "SyntaxError: expected ':'"]


def test_a_worker_without_perform_is_one_line_naming_it_and_the_line(capsys, tmp_path):
    (tmp_path / "app.py").write_text(APP.replace("    def perform(self, payloads_by_id):\n        pass\n",
                                                 "    shards_count = 2\n"))
    assert web_command.main(["--app", str(tmp_path / "app.py")]) == 2
    assert capsys.readouterr().err == (
        f"lowkiq web: {tmp_path / 'app.py'}, line 9: Invoices has no perform method: define perform(self, "
        "payloads_by_id) in it (without one, a server would fail each of its jobs and retry it for about 20 days)\n")


def test_with_no_app_and_no_url_it_says_the_embedded_redis_is_not_the_app_s(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def note(env: dict[str, str]) -> str:
        web_command.plan(web_command.parser().parse_args([]), env)
        return capsys.readouterr().err

    err = note({})
    assert err.startswith("lowkiq web: no app and no Redis URL given: starting a new, empty embedded Redis in "
                          "./.lowkiq. It is not your app's Redis: no server of your app will show here.")
    assert "(LOWKIQ_REDIS_URL=redis://... or --redis-url)" in err and "lowkiq web --app app.py" in err
    (tmp_path / ".lowkiq").mkdir()  # one used before: it is an app's when the app's file is here
    assert (f"watching the embedded Redis kept in ./.lowkiq, which is your app's only if the app's file is in "
            f"{tmp_path}.") in note({})
    for given in ({"LOWKIQ_REDIS_URL": "redis://db.example:6379/0"}, {"REDIS_URL": "redis://db.example:6379/0"},
                  {"LOWKIQ_EMBEDDED_DIR": str(tmp_path / "chosen")}):
        assert note(given) == ""


def test_a_bad_console_setting_stops_it_before_the_banner(capsys, monkeypatch, redis_url):
    # A free address: should the check ever be skipped, the gunicorn it starts binds nothing in use.
    argv = ["--redis-url", redis_url, "--bind", f"127.0.0.1:{free_port()}"]
    monkeypatch.setenv("LOWKIQ_WEB_POLL_INTERVAL", "abc")
    assert web_command.main(argv) == web_command.EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""  # no banner: nothing is served
    assert err == ("lowkiq web: environment variable LOWKIQ_WEB_POLL_INTERVAL='abc' is not valid: "
                   "expected a number of seconds, e.g. 1 or 0.5\n")
    monkeypatch.setenv("LOWKIQ_WEB_POLL_INTERVAL", "5")
    monkeypatch.setenv("LOWKIQ_WEB_PASSWORD", "")  # set but empty; its value is never shown
    assert web_command.main(argv) == web_command.EXIT_USAGE
    assert capsys.readouterr().err == ("lowkiq web: environment variable LOWKIQ_WEB_PASSWORD='' is not valid: "
                                       "it is set but empty\n")
    monkeypatch.setenv("LOWKIQ_WEB_PASSWORD", "s3cret")
    monkeypatch.setenv("LOWKIQ_WEB_STALE_AFTER", "1")
    assert web_command.main(argv) == web_command.EXIT_USAGE
    err = capsys.readouterr().err
    assert "LOWKIQ_WEB_STALE_AFTER='1'" in err and "s3cret" not in err


@pytest.mark.slow
def test_a_bad_console_setting_is_one_line_and_exit_2_from_the_command(tmp_path, redis_url):
    """The real `lowkiq web`: no banner, no gunicorn, no traceback; nothing listens on the address."""
    port = free_port()
    env = {**os.environ, "LOWKIQ_WEB_POLL_INTERVAL": "abc"}
    done = subprocess.run([lowkiq_bin(), "web", "--redis-url", redis_url, "--bind", f"127.0.0.1:{port}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["lowkiq web: environment variable LOWKIQ_WEB_POLL_INTERVAL='abc' is not "
                                        "valid: expected a number of seconds, e.g. 1 or 0.5"]
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{port}/")


# ---- end to end ------------------------------------------------------------------


def stop(process: subprocess.Popen[str], signum: int, base: str) -> str:
    process.send_signal(signum)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    with pytest.raises(OSError):  # gunicorn went with it
        get(base)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serves_the_dashboard_and_the_api_until_a_signal(tmp_path, r, redis_url, signum):
    class Orders(lowkiq.Worker):  # what a server or a client of some app registered
        shards_count = 3

    registry.register(r, [Orders])
    env = {**os.environ, "LOWKIQ_REDIS_URL": redis_url}
    process, base = start(cwd=tmp_path, env=env)
    try:
        assert b"Orders" in get(base)
        stats = json.loads(get(base + "api/v1/stats"))
        assert stats["by_worker"]["Orders"] == {"length": 0, "morgue_length": 0, "lag": 0}
    finally:
        out = stop(process, signum, base)
    assert f"lowkiq console: {base}" in out
    assert f"watching Redis: {redis_url}" in out


@pytest.mark.slow
def test_an_app_on_its_embedded_redis(tmp_path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP")}
    try:
        process, base = start("--app", "app/app.py", cwd=tmp_path, env=env)
        try:
            assert b"Invoices" in get(base)
        finally:
            out = stop(process, signal.SIGTERM, base)
        assert "watching Redis: embedded at ./app/.lowkiq" in out
        assert redis.Redis(unix_socket_path=str(app_dir / ".lowkiq" / "redis.sock")).ping()
    finally:
        connection.stop_embedded(app_dir / ".lowkiq")


@pytest.mark.slow
def test_in_a_folder_without_an_app_the_console_says_its_embedded_redis_is_not_the_app_s(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP", connection.EMBEDDED_DIR_VARIABLE)}
    try:
        process, base = start(cwd=tmp_path, env=env)
        try:
            page = get(base).decode()
        finally:
            out = stop(process, signal.SIGTERM, base)
        assert "starting a new, empty embedded Redis in ./.lowkiq. It is not your app's Redis" in out
        assert "data-embedded-note" in page and "embedded Redis at ./.lowkiq" in page
        assert "Workers appear once a server starts" not in page
    finally:
        connection.stop_embedded(tmp_path / ".lowkiq")


def test_the_served_app_takes_what_start_up_built_out_of_garbage_collections(redis_url):
    import gc

    from lowkiq.webui import create_app, served_app

    gc.unfreeze()
    create_app(environ={"LOWKIQ_REDIS_URL": redis_url})
    assert gc.get_freeze_count() == 0  # create_app leaves the collector alone
    try:
        app = served_app(environ={"LOWKIQ_REDIS_URL": redis_url})
        assert gc.get_freeze_count() > 1000
        assert app.test_client().get("/api/v1/stats").status_code == 200
    finally:
        gc.unfreeze()
