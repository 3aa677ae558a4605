"""The README's Quickstart and the console page (docs/console.md), run as written: the blocks are read
from the pages themselves.

A ```python block starting with ``# name.py`` is written to that file; every line of a ```sh
block is a command, run by bash in the pages' order (the Quickstart, then the console page):

- the install block (virtualenv, ``pip install -e ".[embedded]"``) is what this test's environment
  already is: the editable install of the clone, or the wheel installed in an empty folder;
- ``lowkiq -r ...`` is the server: it keeps running, and must perform every job;
- ``lowkiq web ...`` and ``gunicorn ...`` are consoles: each must show the app's worker at
  the address its comment gives (on a free port, through GUNICORN_CMD_ARGS), then stops;
- anything else runs to completion and must succeed.

They run from a folder shaped like the clone's root and from an empty folder where only the
wheel is installed, on a redis-server of the test's and on the embedded Redis (no Redis URL
at all, as a newcomer runs them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from docs_support import DOCS, README, code_blocks, section
from redis_server import free_port
from wheel_support import ROOT, VENV_BIN, installed_env

from lowkiq import connection

pytestmark = pytest.mark.slow

# Where the blocks are: a section of a page, or (None) the whole page.
SOURCES = ((README, "Quickstart"), (DOCS / "console.md", None))
# The install block, which the test environment stands for (see the module's docstring).
SETUP = {"python3 -m venv .venv", ". .venv/bin/activate", 'pip install -e ".[embedded]"'}
SERVER_JOBS = ("order 0 synced", "order 1 synced", "order 2 synced")


@dataclass
class Block:
    language: str
    text: str

    @property
    def file_name(self) -> str | None:
        first = self.text.splitlines()[0]
        match = re.fullmatch(r"# (\S+\.py)", first.strip())
        return match.group(1) if match else None

    def commands(self) -> list[str]:
        return [line.strip() for line in self.text.splitlines() if line.strip() and not line.strip().startswith("#")]


def blocks(page: Path, heading: str | None) -> list[Block]:
    text = section(heading, page) if heading else page.read_text()
    return [Block(lang, code) for lang, code in code_blocks(text)]


def readme_blocks() -> list[Block]:
    return [b for page, heading in SOURCES for b in blocks(page, heading)]


def console_address(command: str) -> str:
    """The path the command's comment gives for its console ("/" when it names none)."""
    _, _, comment = command.partition("#")
    url = re.search(r"http://[^\s,;)]+", comment)
    return urlsplit(url.group(0).rstrip(".")).path or "/" if url else "/"


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert reply.status == 200, url
        return reply.read()


@dataclass
class Run:
    cwd: Path
    env: dict[str, str]
    server: subprocess.Popen[str] | None = None
    server_log: Path | None = None
    consoles: list[str] = field(default_factory=list)

    def shell(self, command: str, **kwargs) -> subprocess.Popen[str]:
        return subprocess.Popen(["bash", "-c", command], cwd=self.cwd, env=kwargs.pop("env", self.env), text=True,
                                start_new_session=True, **kwargs)

    def run(self, command: str) -> None:
        if command.startswith("lowkiq -r"):
            self.start_server(command)
        elif command.startswith(("lowkiq web", "gunicorn")):
            self.check_console(command)
        else:
            done = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr, done.stderr
            if command == "python enqueue.py":
                assert done.stdout.strip() == "3 jobs enqueued"

    def start_server(self, command: str) -> None:
        self.server_log = self.cwd.parent / "server.log"
        with open(self.server_log, "w") as log:
            self.server = self.shell(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 40  # one job is due 5 s after it was enqueued
        while not all(line in self.server_log.read_text() for line in SERVER_JOBS):
            assert self.server.poll() is None, self.server_log.read_text()
            assert time.monotonic() < deadline, self.server_log.read_text()
            time.sleep(0.2)

    def check_console(self, command: str) -> None:
        port = free_port()
        base = f"http://127.0.0.1:{port}{console_address(command)}"
        env = {**self.env, "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{port}"}
        console = self.shell(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 40
            while True:
                assert console.poll() is None, (command, console.stdout.read())
                try:
                    page = get(base)
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"{command}: no console at {base}"
                    time.sleep(0.2)
            assert b"OrdersWorker" in page, page[:2000]
            stats = json.loads(get(base + "api/v1/stats"))
            assert stats["by_worker"]["OrdersWorker"] == {"length": 0, "morgue_length": 0, "lag": 0}, stats
        finally:
            os.killpg(console.pid, signal.SIGTERM)
            out, _ = console.communicate(timeout=30)
        assert "Traceback" not in out, out
        self.consoles.append(out)

    def stop(self) -> str:
        if self.server is None:
            return ""
        os.killpg(self.server.pid, signal.SIGTERM)
        assert self.server.wait(30) == 0, self.server_log.read_text()
        return self.server_log.read_text()


def run_readme(cwd: Path, env: dict[str, str]) -> Run:
    run = Run(cwd, env)
    setup_seen = set()
    try:
        for block in readme_blocks():
            if block.language == "python":
                assert block.file_name, f"a Python block of the Quickstart or the console page names no file:\n{block.text}"
                (cwd / block.file_name).write_text(block.text)
                continue
            assert block.language == "sh", block.language
            for line in block.commands():
                steps = [step.strip() for step in line.split("#")[0].split("&&")]
                if set(steps) <= SETUP:
                    setup_seen.update(steps)
                    continue
                run.run(line)
    finally:
        server_out = run.stop()
    assert setup_seen == SETUP, f"the Quickstart's install block changed: {setup_seen}; update this test's SETUP"
    assert run.server is not None and len(run.consoles) >= 3
    assert "Traceback" not in server_out and "gave up" not in server_out, server_out
    return run


def clone_root() -> Path:
    """A folder shaped like a fresh clone's root: the repository's top-level entries, linked."""
    folder = Path(tempfile.mkdtemp(prefix="readme-")) / "clone"
    folder.mkdir()
    for name in ("lowkiq", "webui", "templates", "static", "tests", "bench", "docs", "setup.cfg", "pyproject.toml",
                 "Makefile", "README.md"):
        if (ROOT / name).exists():
            (folder / name).symlink_to(ROOT / name)
    return folder


def base_env() -> dict[str, str]:
    """As after `. .venv/bin/activate`, with no Redis configured."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOWKIQ_REDIS_URL", "REDIS_URL", "LOWKIQ_APP", connection.EMBEDDED_DIR_VARIABLE,
                        "GUNICORN_CMD_ARGS", "PYTHONPATH")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    return env


@pytest.mark.parametrize("layout, redis_kind", [("clone", "redis-server"), ("clone", "embedded"),
                                                ("wheel", "embedded")])
def test_the_readme_runs_as_written(layout, redis_kind, request):
    if layout == "clone":
        cwd, env = clone_root(), base_env()
    else:
        cwd = Path(tempfile.mkdtemp(prefix="readme-")) / "empty"
        cwd.mkdir()
        env = installed_env(base_env())
        where = subprocess.run(["bash", "-c", "python -c 'import lowkiq.webui; print(lowkiq.webui.__file__)'"],
                               cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
        assert not where.startswith(str(ROOT)), where  # the wheel, not the source tree
    if redis_kind == "redis-server":
        env["LOWKIQ_REDIS_URL"] = request.getfixturevalue("redis_url")
        request.getfixturevalue("r")  # an empty Redis
    try:
        run = run_readme(cwd, env)
        if redis_kind == "embedded":
            # The client, the server and every console used the one embedded Redis beside app.py.
            assert all("watching Redis: embedded at ./.lowkiq" in out for out in run.consoles if "lowkiq console" in out)
            assert (cwd / ".lowkiq" / "redis.sock").exists()
    finally:
        connection.stop_embedded(cwd / ".lowkiq")
        shutil.rmtree(cwd.parent, ignore_errors=True)


def test_the_console_commands_run_from_the_repository_root(tmp_path, redis_url, r):
    """The consoles that need no file of the app, started in the repository itself (lowkiq/ first on sys.path)."""
    env = {**base_env(), "LOWKIQ_REDIS_URL": redis_url}
    app = Run(tmp_path, env)
    sh = [c for b in readme_blocks() if b.language == "sh" for c in b.commands()]
    for block in readme_blocks():
        if block.language == "python":
            (tmp_path / block.file_name).write_text(block.text)
    consoles = [c for c in sh if c.startswith(("lowkiq web", "gunicorn")) and not re.search(r"\.py|webapp:", c)]
    assert len(consoles) >= 2, sh
    try:
        app.run("python enqueue.py")
        app.run(next(c for c in sh if c.startswith("lowkiq -r")))
        in_the_repository = Run(ROOT, env)
        for command in consoles:
            in_the_repository.check_console(command)
    finally:
        app.stop()
