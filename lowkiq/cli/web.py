"""``lowkiq web``: the standalone console under gunicorn, with defaults fit for one machine.

    lowkiq web                                # http://127.0.0.1:5000/, the Redis of the environment
    lowkiq web --app ./app.py                 # the app's workers, serializers and Redis
    lowkiq web --bind 0.0.0.0:8000 --workers 2 --threads 8

It prints the URL it serves and the Redis it watches (never a password), then
runs gunicorn with ``lowkiq.webui:served_app()`` until SIGTERM or SIGINT, which
it passes on. Options left out here may come from ``GUNICORN_CMD_ARGS``, as for
any gunicorn; what this command is given wins.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from .. import connection
from ..config import redis_url_from

if TYPE_CHECKING:
    from ..runtime import Runtime

EXIT_USAGE = 2
DEFAULT_BIND = "127.0.0.1:5000"
MAX_DEFAULT_WORKERS = 4
DEFAULT_THREADS = 4
APP_SPEC = "lowkiq.webui:served_app()"


class WebError(Exception):
    """Printed as one line, exit code 2."""


def default_workers() -> int:
    """One gunicorn worker per CPU, at most four: the console is light, Redis does the work."""
    return max(1, min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lowkiq web",
        description="Serve the lowkiq console (lowkiq.webui:served_app()) under gunicorn.",
        epilog="Environment: LOWKIQ_REDIS_URL or REDIS_URL (neither: the embedded Redis), LOWKIQ_APP, "
        "LOWKIQ_WEB_PASSWORD, LOWKIQ_WEB_USER, LOWKIQ_WEB_READONLY, LOWKIQ_WEB_POLL_INTERVAL, "
        "LOWKIQ_WEB_SECRET_KEY, GUNICORN_CMD_ARGS (any other gunicorn option).",
    )
    p.add_argument("--app", metavar="APP.py", help="the file that calls lowkiq.configure(workers=[...]) (sets LOWKIQ_APP)")
    p.add_argument("--redis-url", metavar="URL", help="Redis to watch (default: LOWKIQ_REDIS_URL, REDIS_URL, else embedded)")
    p.add_argument("-b", "--bind", metavar="ADDRESS", help=f"host:port or unix:path to serve (default {DEFAULT_BIND})")
    p.add_argument("-w", "--workers", type=int, metavar="N",
                   help=f"gunicorn worker processes (default: CPU count, at most {MAX_DEFAULT_WORKERS}: "
                        f"{default_workers()} here)")
    p.add_argument("--threads", type=int, metavar="N", help=f"threads per worker (default {DEFAULT_THREADS})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        command, env = plan(args, dict(os.environ))
    except WebError as exc:
        print(f"lowkiq web: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run(command, env)


def plan(args: argparse.Namespace, environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The gunicorn command and its environment; prints what it will serve and watch."""
    env = dict(environ)
    if args.redis_url:
        # LOWKIQ_WEB_REDIS_URL wins over the app's configure(), as --redis-url does for lowkiq -r.
        env["LOWKIQ_REDIS_URL"] = env["LOWKIQ_WEB_REDIS_URL"] = args.redis_url
    if args.app:
        app = Path(args.app)
        if not app.is_file():
            raise WebError(f"{args.app}: no such file (the app that calls lowkiq.configure(workers=[...]))")
        env["LOWKIQ_APP"] = str(app.resolve())
    for name, value in (("workers", args.workers), ("threads", args.threads)):
        if value is not None and value < 1:
            raise WebError(f"--{name} must be at least 1, got {value}")
    check_console_settings(env)

    given = _gunicorn_env_options(env.get("GUNICORN_CMD_ARGS", ""))
    options: list[str] = []
    chosen = {"bind": args.bind, "workers": args.workers, "threads": args.threads}
    defaults = {"bind": DEFAULT_BIND, "workers": default_workers(), "threads": DEFAULT_THREADS}
    effective: dict[str, Any] = {}
    for name, value in chosen.items():
        if value is None and given.get(name) is not None:
            effective[name] = given[name]  # gunicorn reads it from GUNICORN_CMD_ARGS itself
            continue
        effective[name] = defaults[name] if value is None else value
        options += [f"--{name}", str(effective[name])]

    watched = watched_redis(env)  # loads the app, if any: its error comes before any banner
    workers, threads = effective["workers"], effective["threads"]
    print(f"lowkiq console: {served_url(str(effective['bind']))}  ({workers} {_plural(workers, 'worker')} "
          f"x {threads} {_plural(threads, 'thread')})", flush=True)
    print(f"watching Redis: {watched}", flush=True)
    note = embedded_note(env)
    if note:
        print(f"lowkiq web: {note}", file=sys.stderr, flush=True)
    return [sys.executable, "-m", "gunicorn", *options, APP_SPEC], env


def embedded_note(env: dict[str, str]) -> str | None:
    """What an operator must know when the console falls back on the embedded Redis of the current
    folder, with no app to say whose it is: an empty console there proves nothing about the app.

    None when a Redis URL, an app or LOWKIQ_EMBEDDED_DIR names the Redis: then it was chosen.
    """
    if redis_url_from(env.get("LOWKIQ_WEB_REDIS_URL"), env) or env.get("LOWKIQ_APP"):
        return None
    if env.get(connection.EMBEDDED_DIR_VARIABLE):
        return None
    folder = connection.embedded_dir(environ=env)
    shown = connection.describe(None, folder).removeprefix("embedded at ")
    where = ("To watch your app's Redis, give the console the URL the app uses (LOWKIQ_REDIS_URL=redis://... or "
             "--redis-url), or the app file its servers run (lowkiq -r app.py: lowkiq web --app app.py)")
    if not folder.exists():
        return (f"no app and no Redis URL given: starting a new, empty embedded Redis in {shown}. It is not your "
                f"app's Redis: no server of your app will show here. {where}.")
    return (f"no app and no Redis URL given: watching the embedded Redis kept in {shown}, which is your app's only "
            f"if the app's file is in {folder.parent}. {where}.")


def check_console_settings(env: dict[str, str]) -> None:
    """The console's LOWKIQ_WEB_* settings, parsed as create_app() parses them.

    A bad one is a WebError naming the variable now, before the banner, rather than a
    traceback from every gunicorn worker that fails to boot.
    """
    # Here, not at the top: importing the console loads Flask, which only `lowkiq web` needs.
    from ..webui.settings import SettingError, from_environ

    try:
        from_environ(env)
    except SettingError as exc:
        raise WebError(str(exc)) from None


def _gunicorn_env_options(value: str) -> dict[str, str | None]:
    """The bind, workers and threads that GUNICORN_CMD_ARGS sets, if it sets them."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-b", "--bind")
    p.add_argument("-w", "--workers")
    p.add_argument("--threads")
    try:
        known, _ = p.parse_known_args(shlex.split(value))
    except (ValueError, SystemExit):
        return {}
    return vars(known)


def _plural(count: object, noun: str) -> str:
    return noun if str(count) == "1" else f"{noun}s"


def served_url(bind: str) -> str:
    """The address gunicorn binds, as something to open."""
    if bind.startswith(("unix:", "fd://")):
        return bind
    host, _, port = bind.rpartition(":")
    if not host:
        host, port = bind, "8000"
    return f"http://{host}:{port}/"


def watched_redis(env: dict[str, str]) -> str:
    """What the console's processes will watch, said without a password.

    With an app file, that is the app's own configuration, so the app is loaded
    here once (an error in it is reported now rather than by every gunicorn worker).
    """
    if env.get("LOWKIQ_WEB_REDIS_URL"):
        return connection.describe(env["LOWKIQ_WEB_REDIS_URL"])
    if not env.get("LOWKIQ_APP"):
        return connection.describe(redis_url_from(None, env), connection.embedded_dir(environ=env))
    runtime = _load_app(env)
    if runtime.settings.redis_url is not None:
        return connection.describe(runtime.settings.redis_url)
    return connection.describe(None, connection.embedded_dir(runtime.settings.workers, env))


def _load_app(env: dict[str, str]) -> Runtime:
    from .. import app_file
    from .. import runtime as runtime_module

    saved, before = dict(os.environ), runtime_module._current
    os.environ.update(env)  # the app reads the same environment as the console will
    try:
        # As the console's processes will load it (console.load_app), minus its wrapping: an error
        # in the app is shown as Python shows it, traceback and all, not squeezed into one line.
        loaded = app_file.load(env["LOWKIQ_APP"], as_main_app=False)
        loaded.close()
        return loaded
    except app_file.AppFileError as exc:
        raise WebError(str(exc)) from exc
    except Exception as exc:
        detail = " ".join(str(exc).split())  # one line, whatever the app raised
        raise WebError(f"{env['LOWKIQ_APP']}: {type(exc).__name__}: {detail}") from exc
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime_module._current = before  # only looked at: this process serves nothing itself


def run(command: list[str], env: dict[str, str]) -> int:
    """gunicorn until it exits; SIGTERM and SIGINT are passed on to it."""
    process = subprocess.Popen(command, env=env)

    def forward(signum: int, _frame: FrameType | None) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = process.wait()
            except KeyboardInterrupt:  # pragma: no cover - the handler above takes SIGINT
                continue
            return 128 - code if code < 0 else code  # killed by a signal: the shell's convention
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
