"""Settings, built once by ``lowkiq.configure(...)``, with environment fallbacks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from . import serializers
from .middleware import Middleware

if TYPE_CHECKING:
    from .worker import Worker

DEFAULT_TTIN_FILE = "/tmp/lowkiq_ttin.txt"


@dataclass(frozen=True)
class Settings:
    workers: tuple[type["Worker"], ...] = ()
    redis_url: str | None = None
    threads_per_node: int = 5
    poll_interval: float = 1.0
    client_pool_size: int = 5
    pool_timeout: float = 5.0
    server_middlewares: tuple[Middleware, ...] = ()
    client_middlewares: tuple[Middleware, ...] = ()
    on_server_init: Callable[[], None] | None = None
    last_words: Callable[[BaseException], None] | None = None
    # "lag", "seq", or a callable building a scheduler (see lowkiq.schedulers)
    build_scheduler: Any = "lag"
    # "default", "by_node", or a callable building a splitter (see lowkiq.splitters)
    build_splitter: Any = "default"
    number_of_nodes: int = 1
    node_number: int = 0
    dump_payload: serializers.DumpPayload = serializers.dump_json
    load_payload: serializers.LoadPayload = serializers.load_json
    format_error: serializers.FormatError = serializers.format_error
    dump_error: serializers.DumpError = serializers.dump_error
    load_error: serializers.LoadError = serializers.load_error
    ttin_file: str = DEFAULT_TTIN_FILE
    extra: Mapping[str, Any] = field(default_factory=dict)

    def worker(self, name: str) -> type["Worker"]:
        for w in self.workers:
            if w.__name__ == name:
                return w
        raise KeyError(name)


# option -> (environment variable, parser)
ENVIRONMENT: dict[str, tuple[str, Callable[[str], Any]]] = {
    "threads_per_node": ("LOWKIQ_THREADS_PER_NODE", int),
    "poll_interval": ("LOWKIQ_POLL_INTERVAL", float),
    "client_pool_size": ("LOWKIQ_CLIENT_POOL_SIZE", int),
    "pool_timeout": ("LOWKIQ_POOL_TIMEOUT", float),
    "number_of_nodes": ("LOWKIQ_NUMBER_OF_NODES", int),
    "node_number": ("LOWKIQ_NODE_NUMBER", int),
    "build_scheduler": ("LOWKIQ_SCHEDULER", str),
    "build_splitter": ("LOWKIQ_SPLITTER", str),
    "ttin_file": ("LOWKIQ_TTIN_FILE", str),
}


def redis_url_from(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """``redis_url`` option, then LOWKIQ_REDIS_URL, then REDIS_URL; None means embedded Redis."""
    return explicit or environ.get("LOWKIQ_REDIS_URL") or environ.get("REDIS_URL") or None


def build_settings(options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    known = {f.name for f in fields(Settings)} - {"extra"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"lowkiq.configure() got unknown options {sorted(unknown)}; known: {sorted(known)}")
    values: dict[str, Any] = {}
    for name, (variable, parse) in ENVIRONMENT.items():
        if name not in options and environ.get(variable):
            try:
                values[name] = parse(environ[variable])
            except ValueError as exc:
                raise ValueError(f"environment variable {variable}={environ[variable]!r} is not a valid {name}: {exc}") from exc
    values.update(options)
    values["redis_url"] = redis_url_from(options.get("redis_url"), environ)
    for name in ("workers", "server_middlewares", "client_middlewares"):
        if name in values:
            values[name] = _as_tuple(values[name], name)
    settings = Settings(**values)
    _validate(settings)
    return settings


def _as_tuple(value: Any, name: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    return tuple(value)


def _validate(settings: Settings) -> None:
    from .worker import Worker

    for w in settings.workers:
        if not (isinstance(w, type) and issubclass(w, Worker)):
            raise TypeError(f"workers must be lowkiq.Worker subclasses, got {w!r}")
    names = [w.__name__ for w in settings.workers]
    queues = [w.queue_name for w in settings.workers]
    for label, items in (("worker class name", names), ("queue_name", queues)):
        dupes = sorted({x for x in items if items.count(x) > 1})
        if dupes:
            raise ValueError(f"two workers share the {label} {dupes[0]!r}")
    positive = {"threads_per_node": 1, "client_pool_size": 1, "number_of_nodes": 1}
    for name, low in positive.items():
        value = getattr(settings, name)
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if not (0 <= settings.node_number < settings.number_of_nodes):
        raise ValueError(f"node_number must be in 0..{settings.number_of_nodes - 1}, got {settings.node_number}")
    for name in ("poll_interval", "pool_timeout"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be > 0, got {getattr(settings, name)!r}")
