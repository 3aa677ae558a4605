"""Every setting a user can give as text: its environment variable, its command-line flag, its help.

One table serves ``lowkiq.configure`` (environment fallbacks), the ``lowkiq``
command (flags and ``--help``) and the configuration table of docs/configuration.md (a test
checks it), so none of them can drift from the others. Text is parsed
strictly: ``"5 "``, ``"5.0"`` for an integer, or ``"nan"`` for a number are
errors that name the variable, never a value read some other way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The highest CPU number --cpus takes (Linux counts them from 0; 4096 is the largest CPU set it builds).
MAX_CPU = 4095
_CPU_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def cpu_list(text: str) -> tuple[int, ...]:
    """``"0"``, ``"2,3"``, ``"0-3,6"`` (Linux's cpuset notation): the CPUs in the order given, each once."""
    cpus: list[int] = []
    for part in text.split(","):
        found = _CPU_RANGE.fullmatch(part)
        if not found:
            raise ValueError("expected CPU numbers like 0, 0,2 or 0-3")
        first = int(found.group(1))
        last = int(found.group(2)) if found.group(2) is not None else first
        if last < first or last > MAX_CPU:
            raise ValueError(f"{part!r} is no range of CPUs 0..{MAX_CPU}")
        cpus += [cpu for cpu in range(first, last + 1) if cpu not in cpus]
    return tuple(cpus)



_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
BOOLEAN_HELP = "one of 1, true, yes, on, 0, false, no, off (any case, no spaces)"


def boolean(text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off``, in any case; anything else (``"1 "``, ``"y"``, ``""``) is an error."""
    lowered = text.lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueError(f"expected {BOOLEAN_HELP}")


def integer(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise ValueError("expected a whole number, e.g. 5")
    return int(text)


def number(text: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise ValueError("expected a number of seconds, e.g. 1 or 0.5")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def word(text: str) -> str:
    if not text or text != text.strip():
        raise ValueError("expected a non-empty value without surrounding spaces")
    return text


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    parse.choices = choices  # type: ignore[attr-defined]
    return parse


@dataclass(frozen=True)
class Option:
    """A setting of ``lowkiq.configure`` that can also come from the environment and/or the command line."""

    name: str
    env: str | None
    parse: Callable[[str], Any]
    help: str
    flag: str | None = None
    short: str | None = None
    metavar: str | None = None

    @property
    def choices(self) -> tuple[str, ...] | None:
        return getattr(self.parse, "choices", None)


OPTIONS: tuple[Option, ...] = (
    Option("redis_url", "LOWKIQ_REDIS_URL", word, "Redis to use (then REDIS_URL; neither: an embedded Redis)",
           "--redis-url", metavar="URL"),
    Option("threads_per_node", "LOWKIQ_THREADS_PER_NODE", integer, "server threads of this process (default 5)",
           "--threads", "-t", "N"),
    Option("poll_interval", "LOWKIQ_POLL_INTERVAL", number, "idle wait between polls, seconds (default 1)",
           "--poll-interval", metavar="SECONDS"),
    Option("client_pool_size", "LOWKIQ_CLIENT_POOL_SIZE", integer, "Redis connections for enqueueing (default 5)"),
    Option("pool_timeout", "LOWKIQ_POOL_TIMEOUT", number, "seconds to wait for a connection (default 5)"),
    Option("build_scheduler", "LOWKIQ_SCHEDULER", one_of("lag", "seq"),
           "which shard a thread works next (default lag)", "--scheduler"),
    Option("build_splitter", "LOWKIQ_SPLITTER", one_of("default", "by_node"),
           "pin shards to threads as Lowkiq did (default: none, the threads share the process's shards)",
           "--splitter"),
    Option("number_of_nodes", "LOWKIQ_NUMBER_OF_NODES", integer,
           "Lowkiq's node count: a preference for which shards this process holds", "--nodes", metavar="N"),
    Option("node_number", "LOWKIQ_NODE_NUMBER", integer, "this process's node number, 0..N-1 (a preference)",
           "--node-number", metavar="K"),
    Option("ttin_file", "LOWKIQ_TTIN_FILE", word, "where SIGTTIN writes the thread dump", "--ttin-file",
           metavar="PATH"),
    Option("lease_ttl", "LOWKIQ_LEASE_TTL", number, "seconds a shard's lease lasts without renewal (default 5)",
           "--lease-ttl", metavar="SECONDS"),
    Option("heartbeat_interval", "LOWKIQ_HEARTBEAT_INTERVAL", number,
           "seconds between heartbeats and lease renewals (default 1)", "--heartbeat-interval", metavar="SECONDS"),
    Option("settle", "LOWKIQ_SETTLE", number,
           "seconds the live servers must stay unchanged before shards move (default 1)", "--settle",
           metavar="SECONDS"),
    Option("min_perform_budget", "LOWKIQ_MIN_PERFORM_BUDGET", number,
           "a perform starting with less lease left renews it first (default 1)"),
    Option("crash_limit", "LOWKIQ_CRASH_LIMIT", integer,
           "takeovers of a job whose server died performing it before it goes to the morgue (default 3)",
           "--crash-limit", metavar="N"),
    Option("suspect_wait", "LOWKIQ_SUSPECT_WAIT", number,
           "seconds the other threads wait for a suspect batch of a worker without a time_limit (default 30)",
           "--suspect-wait", metavar="SECONDS"),
    Option("shutdown_timeout", "LOWKIQ_SHUTDOWN_TIMEOUT", number,
           "seconds a stopping server waits for running performs (default 25)", "--shutdown-timeout",
           metavar="SECONDS"),
    Option("processes", "LOWKIQ_PROCESSES", integer,
           "server processes to run under one parent, sharing the shards (default 1): more than one core",
           "--processes", metavar="N"),
    Option("cpus", "LOWKIQ_CPUS", cpu_list,
           "hold each server process to one CPU of this list (0, 0,2 or 0-3; the n-th process takes the n-th): "
           "its threads then pass the GIL on one core (default: not held)", "--cpus", metavar="LIST"),
    Option("traceback_limit", "LOWKIQ_TRACEBACK_LIMIT", integer,
           "characters of a failure's traceback kept with each failed job, 0 for none (default 16384)"),
    Option("long_perform", "LOWKIQ_LONG_PERFORM", number, "the console flags performs longer than this (default 300)"),
    Option("member_name", "LOWKIQ_MEMBER_NAME", word,
           "a name that outlives the process (a pod's): a restart tends to get its shards back", "--member-name",
           metavar="NAME"),
    Option("metrics_port", "LOWKIQ_METRICS_PORT", integer,
           "serve this server's own Prometheus metrics on this port, at /metrics (default 0: off)", "--metrics-port",
           metavar="PORT"),
    Option("durable_enqueue", "LOWKIQ_DURABLE_ENQUEUE", boolean,
           "perform_async waits until a replica has the jobs, else raises NotDurable (default false)"),
    Option("replica_wait", "LOWKIQ_REPLICA_WAIT", number,
           "seconds lease grants and durable enqueues wait for a replica (default 1)", "--replica-wait",
           metavar="SECONDS"),
)

BY_NAME = {option.name: option for option in OPTIONS}


def from_environment(environ: Any, given: Any) -> dict[str, Any]:
    """The options the environment sets and ``given`` does not, parsed; a bad value names its variable."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        if option.env is None or option.name in given or option.name == "redis_url":
            continue
        text = environ.get(option.env)
        if text is None:
            continue
        try:
            values[option.name] = option.parse(text)
        except ValueError as exc:
            raise ValueError(f"environment variable {option.env}={text!r} is not a valid {option.name}: {exc}") from None
    return values
