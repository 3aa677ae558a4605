"""``lowkiq.testing.drain``: a server's batches, performed in the calling thread until nothing is due.

It is the server's own path: the shards' leases taken through ``Holdings`` (so the scripts fence its
writes), each batch taken, performed through the server middlewares and acknowledged or failed by
``ShardHandler`` (retry state, morgue, ``retries_exhausted``, history, events), the leases renewed
meanwhile as a server's keeper renews them, and released at the end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence

from .. import runtime as runtime_module
from ..jobs import MorgueJob
from ..runtime import Runtime
from ..server import group_limits
from ..server.holdings import Holdings
from ..server.shard_handler import Ack, ShardHandler, StopProcess
from ..store import dependencies, lua
from ..store.leases import Lease, LeaseCheck, verify
from ..store.membership import new_member_id
from ..store.queue import Taken
from ..transport.errors import REDIS_ERRORS
from ..worker import Shard, Worker, check_perform
from .results import Drained, DrainFailed, Failure, ShardsHeld

log = logging.getLogger("lowkiq.testing")

THREAD = "drain"  # the thread name the ids' history shows


def drain(*workers: type[Worker], raise_errors: bool = True) -> Drained:
    """See ``lowkiq.testing.drain``."""
    runtime = runtime_module.current()
    chosen = list(dict.fromkeys(workers)) or list(runtime.settings.workers)
    for worker in chosen:
        if not (isinstance(worker, type) and issubclass(worker, Worker)):
            raise TypeError(f"drain takes lowkiq.Worker subclasses, got {worker!r}")
        check_perform(worker)
    drained = Drained([worker.__name__ for worker in chosen])
    wire = lua.Wire(runtime.client)
    holdings = Holdings(runtime, f"drain-{new_member_id()}")
    held: list[Lease] = []
    renewer = _Renewer(runtime, holdings, held)
    pending: Ack | None = None
    try:
        held.extend(_acquire(holdings, wire, chosen))
        renewer.start()
        # one instance per worker, as a server thread has: a worker's own state is shared by its shards' batches
        instances = {worker: worker() for worker in chosen}
        handlers = [_Handler(lease, instances[lease.shard.worker], drained, runtime, wire) for lease in held]
        busy = True
        while busy:  # again from the first shard: a perform may have enqueued to any of them
            busy = False
            for handler in handlers:
                while True:
                    taken = handler.take(pending)
                    pending = None
                    if not taken.jobs:
                        break
                    busy = True
                    if handler.lease.remaining() < runtime.settings.min_perform_budget:
                        renewer.renew([handler.lease], wire)
                    pending = handler.perform(taken)
                    if pending is not None:
                        drained[handler.name].extend(pending.ids)
            if not busy:
                # what a server's keeper does: the releases of performed dependencies reach their dependents
                # (docs/dependencies.md), and those of the drained workers are performed in this drain too
                busy = _deliver_releases(runtime, held) > 0
    except StopProcess as stop:  # KeyboardInterrupt, SystemExit: its batch was failed, as a server does
        raise stop.cause from None
    finally:
        renewer.stop()
        try:
            acked = {id(pending.handler.lease): pending.ids} if pending is not None else {}
            holdings.release(wire, [lease for lease in held if lease.lost is None], acked)
        finally:
            wire.close()
    if drained.failures and raise_errors:
        raise DrainFailed(drained) from drained.failures[0].exception
    return drained


def _deliver_releases(runtime: Runtime, held: Sequence[Lease]) -> int:
    client = runtime.client
    return dependencies.deliver(client, dependencies.pending_releases(client, [lease.keys for lease in held]))


def _acquire(holdings: Holdings, wire: lua.Wire, workers: Sequence[type[Worker]]) -> list[Lease]:
    shards = [Shard(worker, index) for worker in workers for index in range(worker.shards_count)]
    outcomes = holdings.acquire(wire, shards)
    leases = [outcome for outcome in outcomes if isinstance(outcome, Lease)]
    refused = [(shard, outcome) for shard, outcome in zip(shards, outcomes) if not isinstance(outcome, Lease)]
    if refused:
        holdings.release(wire, leases, {})
        raise ShardsHeld([(str(shard), None if outcome is None else outcome.owner) for shard, outcome in refused])
    for lease in leases:
        lease.check = _checker(holdings.runtime)
    return leases


def _checker(runtime: Runtime) -> LeaseCheck:
    """How ``lowkiq.context().lease_lost`` asks Redis, past the lease's local deadline."""
    return lambda lease: verify(runtime.client, lease)


class _Handler(ShardHandler):
    """A server's handler of one shard, performing in the calling thread, that reports its failures."""

    def __init__(self, lease: Lease, instance: Worker, drained: Drained, runtime: Runtime, wire: lua.Wire) -> None:
        worker = lease.shard.worker
        super().__init__(lease, instance, runtime.queue(worker), runtime.settings, wire, thread=THREAD,
                         clock=runtime.clock, events=runtime.events, in_child=False)
        self.drained = drained

    def fail(self, taken: Taken, exc: BaseException, seconds: float | None, *,
             formatted: tuple[str, str | None] | None = None,
             per_id: Mapping[str, tuple[str, str | None]] | None = None,
             crashed: bool = False) -> list[MorgueJob]:
        morgued = super().fail(taken, exc, seconds, formatted=formatted, per_id=per_id, crashed=crashed)
        ids = [job.id for job in taken.jobs]
        failed = ids if per_id is None else [job_id for job_id in ids if job_id in per_id]
        if per_id is not None:  # a PartialFailure: the others were performed, and acknowledged with it
            self.drained[self.name].extend(job_id for job_id in ids if job_id not in per_id)
        self.drained.failures.append(Failure(self.name, failed, exc, [job.id for job in morgued]))
        return morgued


class _Renewer:
    """Renews the drain's leases while it performs, as a server's keeper does: a perform longer than
    ``lease_ttl`` keeps its shard."""

    def __init__(self, runtime: Runtime, holdings: Holdings, held: list[Lease]) -> None:
        self.interval = runtime.settings.heartbeat_interval
        self.runtime = runtime
        self.holdings = holdings
        self.held = held
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lowkiq-drain-renewer", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join()

    def renew(self, leases: Sequence[Lease], wire: lua.Wire) -> None:
        group_limits.extend(wire, leases)  # a permit must not end before its lease (docs/fairness.md)
        self.holdings.renew(wire, leases)

    def _run(self) -> None:
        wire = lua.Wire(self.runtime.client)
        try:
            while not self.stopped.wait(self.interval):
                due_before = time.monotonic() - self.interval
                due = [lease for lease in self.held if lease.lost is None and lease.renewed_at <= due_before]
                if not due:
                    continue
                try:
                    self.renew(due, wire)
                except REDIS_ERRORS as exc:
                    log.warning("drain: could not renew its leases (%s: %s); retrying", type(exc).__name__, exc)
        finally:
            wire.close()
