"""Settings, built once by ``lowkiq.configure(...)``, with environment fallbacks."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import serializers
from .errors import ConfigurationError
from .middleware import Middleware
from .options import MAX_CPU, from_environment

if TYPE_CHECKING:
    from .schedule import Schedule
    from .worker import Worker

DEFAULT_TTIN_FILE = "/tmp/lowkiq_ttin.txt"


@dataclass(frozen=True)
class Settings:
    workers: tuple[type[Worker], ...] = ()
    # lowkiq.Schedule objects: recurring jobs into the workers' queues (see lowkiq.schedule)
    schedules: tuple[Schedule, ...] = ()
    redis_url: str | None = None
    threads_per_node: int = 5
    poll_interval: float = 1.0
    client_pool_size: int = 5
    pool_timeout: float = 5.0
    server_middlewares: tuple[Middleware, ...] = ()
    client_middlewares: tuple[Middleware, ...] = ()
    # callables told every lowkiq.events.Event of this process (logs, metrics, traces)
    subscribers: tuple[Callable[[Any], None], ...] = ()
    on_server_init: Callable[[], None] | None = None
    last_words: Callable[[BaseException], None] | None = None
    # "lag", "seq", or a callable building a scheduler (see lowkiq.server.schedulers)
    build_scheduler: Any = "lag"
    # None (the default): a process's threads share the shards it holds (lowkiq.server.shard_pool); "default",
    # "by_node", or a callable building a splitter pins shards to threads instead (lowkiq.server.splitters)
    build_splitter: Any = None
    number_of_nodes: int = 1
    node_number: int = 0
    dump_payload: serializers.DumpPayload = serializers.dump_json
    load_payload: serializers.LoadPayload = serializers.load_json
    format_error: serializers.FormatError = serializers.format_error
    dump_error: serializers.DumpError = serializers.dump_error
    load_error: serializers.LoadError = serializers.load_error
    # `lowkiq -r` runs this many server processes under one parent (see lowkiq.server.supervisor)
    processes: int = 1
    # hold each server process to one CPU of these (the n-th process to the n-th), see lowkiq.server.cpu_pinning
    cpus: tuple[int, ...] = ()
    # characters of a failure's traceback stored beside its error (0: none), per job
    traceback_limit: int = 16384
    ttin_file: str = DEFAULT_TTIN_FILE
    # Shard leases (see docs/server.md, "Deployment"): seconds, in Redis server time
    lease_ttl: float = 5.0
    heartbeat_interval: float = 1.0
    settle: float = 1.0
    # a perform about to start with less lease time left renews first
    min_perform_budget: float = 1.0
    # jobs whose server died while performing them this many times go to the morgue
    crash_limit: int = 3
    # seconds the other threads wait for a suspect batch (in flight when a server died) of a worker without
    # a time_limit, performed alone; with one, they wait its time_limit (+ time_limit_grace under isolation)
    suspect_wait: float = 30.0
    # on SIGTERM, how long to wait for running performs before leaving them to a takeover
    shutdown_timeout: float = 25.0
    # the console flags performs running longer than this
    long_perform: float = 300.0
    # a name that outlives the process (a pod's name): a restart tends to get its shards back
    member_name: str = ""
    # a server serves its own Prometheus metrics on this port (0: not at all)
    metrics_port: int = 0
    # perform_async waits until a replica holds the jobs, else raises NotDurable
    durable_enqueue: bool = False
    # how long lease grants and durable enqueues wait for a replica (Redis WAIT), seconds
    replica_wait: float = 1.0


def redis_url_from(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """``redis_url`` option, then LOWKIQ_REDIS_URL, then REDIS_URL; None means embedded Redis."""
    return explicit or environ.get("LOWKIQ_REDIS_URL") or environ.get("REDIS_URL") or None


def build_settings(options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    known = {f.name for f in fields(Settings)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"lowkiq.configure() got unknown options {sorted(unknown)}; known: {sorted(known)}")
    values: dict[str, Any] = from_environment(environ, options)
    values.update(options)
    values["redis_url"] = redis_url_from(options.get("redis_url"), environ)
    for name in ("workers", "schedules", "server_middlewares", "client_middlewares", "subscribers", "cpus"):
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
    from .worker import Worker, check_perform, is_async, is_coroutine, refuse_coroutine  # worker.py reaches config

    for w in settings.workers:
        if not (isinstance(w, type) and issubclass(w, Worker)):
            raise TypeError(f"workers must be lowkiq.Worker subclasses, got {w!r}")
        check_perform(w)
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
    for subscriber in settings.subscribers:
        if not callable(subscriber):
            raise TypeError(f"subscribers must be callables taking a lowkiq.events.Event, got {subscriber!r}")
    sync_workers = [w.__name__ for w in settings.workers if not is_async(w)]
    if len(sync_workers) < len(settings.workers) and settings.build_splitter is not None:
        raise ConfigurationError(
            "async workers (async def perform) cannot be served with a splitter: a splitter pins shards to "
            "threads, and async workers' shards are performed by the process's event loop. Leave build_splitter "
            "(LOWKIQ_SPLITTER) unset")
    for name in ("server_middlewares", "client_middlewares", "subscribers"):
        for i, fn in enumerate(getattr(settings, name)):
            where = f"{name}[{i}] ({getattr(fn, '__qualname__', type(fn).__name__)})"
            if name == "server_middlewares" and is_coroutine(fn) and not sync_workers:
                continue  # wraps async workers' performs only: awaited on the event loop (docs/async.md)
            if name == "server_middlewares" and is_coroutine(fn) and len(sync_workers) < len(settings.workers):
                raise ConfigurationError(
                    f"{where} is a coroutine function: it may wrap async workers' performs only, and sync workers "
                    f"({', '.join(sync_workers)}) perform in threads with no event loop to await it. Make it a plain "
                    f"def (an async worker's call_next() then returns an awaitable to return)")
            refuse_coroutine(fn, where)
    for name in ("on_server_init", "last_words", "dump_payload", "load_payload", "format_error", "dump_error",
                 "load_error"):
        refuse_coroutine(getattr(settings, name), name)
    port = settings.metrics_port
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"metrics_port must be a port number 0..65535 (0: off), got {port!r}")
    processes = settings.processes
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= 64:
        raise ValueError(f"processes must be a number of server processes 1..64, got {processes!r}")
    for cpu in settings.cpus:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or not 0 <= cpu <= MAX_CPU:
            raise ValueError(f"cpus must list CPU numbers 0..{MAX_CPU}, got {list(settings.cpus)!r}")
    limit = settings.traceback_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 1_048_576:
        raise ValueError(f"traceback_limit must be a number of characters 0..1048576 (0: none), got {limit!r}")
    if not isinstance(settings.durable_enqueue, bool):
        raise ValueError(f"durable_enqueue must be True or False, got {settings.durable_enqueue!r}")
    for name in ("poll_interval", "pool_timeout", "heartbeat_interval", "long_perform", "replica_wait", "suspect_wait"):
        if not _number(getattr(settings, name)) or getattr(settings, name) <= 0:
            raise ValueError(f"{name} must be a number > 0, got {getattr(settings, name)!r}")
    for name in ("settle", "min_perform_budget", "shutdown_timeout"):
        if not _number(getattr(settings, name)) or getattr(settings, name) < 0:
            raise ValueError(f"{name} must be a number >= 0, got {getattr(settings, name)!r}")
    if not _number(settings.lease_ttl) or settings.lease_ttl < 2:
        raise ValueError(f"lease_ttl must be a number of seconds >= 2, got {settings.lease_ttl!r}")
    if settings.heartbeat_interval * 3 > settings.lease_ttl:
        raise ValueError(f"heartbeat_interval ({settings.heartbeat_interval}) must be at most lease_ttl / 3 "
                         f"({settings.lease_ttl / 3:g}): a lease must survive a missed renewal or two")
    if settings.min_perform_budget > settings.lease_ttl / 2:
        raise ValueError(f"min_perform_budget ({settings.min_perform_budget}) must be at most lease_ttl / 2 "
                         f"({settings.lease_ttl / 2:g})")
    _validate_schedules(settings)
    if isinstance(settings.crash_limit, bool) or not isinstance(settings.crash_limit, int) or settings.crash_limit < 1:
        raise ValueError(f"crash_limit must be an int >= 1, got {settings.crash_limit!r}")


def _validate_schedules(settings: Settings) -> None:
    from .jobs import prepare
    from .schedule import validate_all

    validate_all(settings.schedules, settings.workers)
    for schedule in settings.schedules:
        try:  # the payload must survive the configured serializer, as a perform_async would check it
            prepare([{"id": schedule.job_id, "payload": schedule.payload_for(0.0)}], now=0.0,
                    dump_payload=settings.dump_payload)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"schedule {schedule.name!r}: {exc}") from exc


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
