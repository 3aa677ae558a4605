"""``--cpus``: a server process runs on one CPU.

A server's threads share one GIL and hand it over at every Redis round trip.
Spread over several cores, each handover wakes a thread on another core, and
the process spends much of its CPU passing the GIL around (on a 2-core box
the drain of bench item 1 ran 1.3-1.6x faster, with a quarter to 40% less
server CPU per job, once the server was held to one core). Python runs on one core
per process anyway; ``--processes N`` is how a server uses more, and with
``--cpus`` each of its processes takes a CPU of its own.

The price: a perform that releases the GIL to compute (compression, numpy)
no longer runs beside another thread's on a second core, and a subprocess or
multiprocessing pool that a perform starts inherits the one CPU. That is why
it is a choice, not the default.
"""

from __future__ import annotations

import os

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import PinningError as PinningError


def cpu_of(cpus: tuple[int, ...], process_number: int) -> int:
    """The CPU of the ``process_number``-th server process: the list's CPUs in turn."""
    return cpus[process_number % len(cpus)]


def check(cpus: tuple[int, ...]) -> None:
    """Refuse, before anything starts, CPUs this process may not use or a system that cannot hold a process."""
    if not hasattr(os, "sched_setaffinity"):
        raise PinningError("cpus: this system cannot hold a process to a CPU (no sched_setaffinity); leave cpus unset")
    allowed = sorted(os.sched_getaffinity(0))
    refused = [cpu for cpu in cpus if cpu not in allowed]
    if refused:
        raise PinningError(f"cpus: CPU {refused[0]} is not one this process may run on ({_ranges(allowed)})")


def pin(cpu: int) -> None:
    """Hold this process, every thread it has and every thread it starts, to ``cpu``."""
    check((cpu,))
    # On Linux the call moves one thread, and a thread inherits the CPUs of the one that starts it: pin
    # every thread there is, again until no new one appeared meanwhile.
    done: set[int] = set()
    while True:
        threads = _threads() - done
        if not threads:
            return
        for thread_id in threads:
            try:
                os.sched_setaffinity(thread_id, {cpu})
            except ProcessLookupError:  # a thread that ended meanwhile
                pass
            except OSError as exc:
                raise PinningError(f"cpus: thread {thread_id} of this process cannot be held to CPU {cpu}: {exc}") from exc
        done |= threads


def _threads() -> set[int]:
    try:
        return {int(name) for name in os.listdir("/proc/self/task")}
    except OSError as exc:
        raise PinningError(f"cpus: this process's threads cannot be listed in /proc/self/task: {exc}") from exc


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    out: list[str] = []
    start = previous = cpus[0]
    for cpu in [*cpus[1:], None]:
        if cpu is not None and cpu == previous + 1:
            previous = cpu
            continue
        out.append(str(start) if start == previous else f"{start}-{previous}")
        if cpu is not None:
            start = previous = cpu
    return ",".join(out)
