"""examples/docker: with no Docker engine here, what can be checked of it is: the compose file and the
Dockerfile parse, the Dockerfile copies paths that exist, and each service's command is lowkiq's own, with
options that lowkiq and gunicorn accept. Then the commands themselves run as compose would run them (Redis
the tests' own), and pass their health checks."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples_support import EXAMPLES
from redis_server import RedisServer, free_port
from server_support import lowkiq_bin

from lowkiq import cli

FOLDER = EXAMPLES / "docker"
COMPOSE = FOLDER / "compose.yaml"


def compose() -> dict[str, Any]:
    found = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(found, dict)
    return found


def service(name: str) -> dict[str, Any]:
    found = compose()["services"][name]
    assert isinstance(found, dict)
    return found


def dockerfile_instructions(path: Path) -> list[tuple[str, list[str]]]:
    """(instruction, arguments) of each line, continuations joined, comments left out; JSON forms read as JSON."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        rest = rest.strip()
        args = json.loads(rest) if rest.startswith("[") else rest.split()
        found.append((instruction.upper(), args))
    return found


def interpolated(value: str, environ: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error} in a value."""
    def one(match: re.Match[str]) -> str:
        name, form, word = match.group(1), match.group(2) or "", match.group(3) or ""
        if environ.get(name):
            return environ[name]
        if form == ":?":
            raise AssertionError(f"compose would refuse to start: {word}")
        return word if form == ":-" else ""
    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, value)


def environment(name: str, redis_url: str, **given: str) -> dict[str, str]:
    """The service's environment as compose gives it, with the tests' Redis for the service named redis."""
    values = {key: interpolated(str(value), given) for key, value in service(name).get("environment", {}).items()}
    assert values["LOWKIQ_REDIS_URL"] == "redis://redis:6379/0"
    # The image has lowkiq and gunicorn on its PATH; here they are the virtualenv's.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, **values, "LOWKIQ_REDIS_URL": redis_url, "PATH": path}


def test_the_compose_file_builds_one_image_from_the_repository() -> None:
    services = compose()["services"]
    assert set(services) == {"redis", "server", "console"}
    for name in ("server", "console"):
        build = services[name]["build"]
        context = (FOLDER / build["context"]).resolve()
        assert context == EXAMPLES.parent
        assert (context / build["dockerfile"]).resolve() == (FOLDER / "Dockerfile").resolve()
        assert services[name]["image"] == "lowkiq-example"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_every_path_the_dockerfile_copies_exists() -> None:
    instructions = dockerfile_instructions(FOLDER / "Dockerfile")
    assert instructions[0][0] == "FROM"
    context = (FOLDER / service("server")["build"]["context"]).resolve()
    copied = []
    for instruction, args in instructions:
        assert instruction != "ADD", "COPY, not ADD: nothing fetched or unpacked behind the reader's back"
        if instruction == "COPY":
            sources = [a for a in args if not a.startswith("--")][:-1]
            assert sources, args
            copied += sources
    missing = [source for source in copied if not (context / source).exists()]
    assert not missing and copied, missing
    # What the services run from the image's WORKDIR is what it copies there.
    assert {"examples/docker/app.py", "examples/docker/healthcheck.py"} <= set(copied)
    assert [args for instruction, args in instructions if instruction == "WORKDIR"][-1] == ["/app"]


def test_the_servers_command_and_options_are_lowkiqs() -> None:
    command = service("server")["command"]
    assert command[0] == "lowkiq"
    shown = subprocess.run([lowkiq_bin(), "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    flags = [word for word in command[1:] if word.startswith("-")]
    assert flags == ["-r", "--metrics-port"]
    assert all(re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", shown.stdout) for flag in flags), shown.stdout
    args = cli.parser().parse_args(command[1:])
    assert (args.require, args.metrics_port) == ("app.py", 9108)
    assert (FOLDER / args.require).is_file()
    health = service("server")["healthcheck"]["test"]
    assert health == ["CMD", "python", "healthcheck.py", "http://127.0.0.1:9108/healthz"]


def test_the_consoles_command_loads_under_gunicorn(redis_server: RedisServer) -> None:
    command = service("console")["command"]
    assert command[0] == "gunicorn"
    module, _, factory = command[-1].removesuffix("()").partition(":")
    assert (module, factory) == ("lowkiq.webui", "served_app")
    import lowkiq.webui

    assert callable(getattr(lowkiq.webui, factory)) and callable(lowkiq.webui.create_app)
    # gunicorn's own check: its options, and the app loads from the service's environment.
    env = environment("console", redis_server.url, LOWKIQ_WEB_PASSWORD="s3cret")
    checked = subprocess.run([sys.executable, "-m", "gunicorn", "--check-config", *command[1:]], cwd=FOLDER, env=env,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with pytest.raises(AssertionError, match="set LOWKIQ_WEB_PASSWORD"):
        environment("console", redis_server.url)


def healthy(test: list[str], env: dict[str, str], timeout: float = 20) -> bool:
    """Run a compose healthcheck's command until it passes (True) or ``timeout`` passes (False)."""
    assert test[:2] == ["CMD", "python"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run([sys.executable, *test[2:]], cwd=FOLDER, env=env, capture_output=True,
                          timeout=10).returncode == 0:
            return True
        time.sleep(0.2)
    return False


def on_port(words: list[str], old: int, new: int) -> list[str]:
    return [word.replace(str(old), str(new)) for word in words]


@pytest.mark.slow
def test_the_services_commands_run_and_pass_their_healthchecks(redis_server: RedisServer, r: Any) -> None:
    metrics, web = free_port(), free_port()
    server_env = environment("server", redis_server.url)
    console_env = environment("console", redis_server.url, LOWKIQ_WEB_PASSWORD="s3cret")
    server = subprocess.Popen(on_port(service("server")["command"], 9108, metrics), cwd=FOLDER, env=server_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    console = subprocess.Popen(on_port(service("console")["command"], 8000, web), cwd=FOLDER, env=console_env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert healthy(on_port(service("server")["healthcheck"]["test"], 9108, metrics), server_env)
        assert healthy(on_port(service("console")["healthcheck"]["test"], 8000, web), console_env)
        # The probe is open; the console itself asks for the password the service's environment sets.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{web}/", timeout=5)
        assert refused.value.code == 401
        signed = urllib.request.Request(f"http://127.0.0.1:{web}/", headers={
            "Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()})
        with urllib.request.urlopen(signed, timeout=5) as page:
            assert page.status == 200 and b"Dashboard" in page.read()
    finally:
        for process in (server, console):
            process.terminate()
        assert server.wait(30) == 0
        console.wait(30)
