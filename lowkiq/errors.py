"""Every error of lowkiq a user may catch, each a ``LowkiqError``.

``except lowkiq.LowkiqError`` catches them all; each also keeps the built-in base it had
(``ValueError`` for bad input, ``RuntimeError`` for a missing setup, ``LookupError`` for
an unknown worker, ``redis.RedisError`` for Redis failing part of a call), and errors of
Redis's own stay redis-py's exceptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import redis


class LowkiqError(Exception):
    """The base of every error lowkiq raises on purpose."""


class PartialEnqueue(LowkiqError, redis.RedisError):
    """``perform_async`` may have written some jobs and not others: Redis failed for part of the call.

    Any failure once part of the call may have been written raises it: an error reply to
    one shard's script, a timeout, a connection reset or refused part way. Each push script
    writes one shard's slice of the call atomically, so every job is in exactly one of
    ``written``, ``not_written`` (its slice was refused, or never wholly sent) or
    ``uncertain`` (its script's reply was lost: written or not), each a list of positions
    in the list given to ``perform_async``. A call Redis did none of for certain (it could
    not be reached, or refused every slice) raises Redis's own error instead; either way
    ``except redis.RedisError`` catches it. Enqueueing again the jobs not known to be
    written, or the whole call, is safe: an equal payload merges into the queued job (its
    lower score is kept)::

        try:
            OrdersWorker.perform_async(jobs)
        except lowkiq.PartialEnqueue as exc:
            OrdersWorker.perform_async([jobs[i] for i in exc.not_written + exc.uncertain])
    """

    def __init__(self, queue_name: str, written: Sequence[int], not_written: Sequence[int],
                 uncertain: Sequence[int], cause: BaseException) -> None:
        self.queue_name = queue_name
        self.written = list(written)
        self.not_written = list(not_written)
        self.uncertain = list(uncertain)
        self.cause = cause
        total = len(self.written) + len(self.not_written) + len(self.uncertain)
        super().__init__(
            f"perform_async on queue {queue_name!r} wrote {len(self.written):,} of {total:,} jobs before Redis "
            f"failed ({type(cause).__name__}: {cause}); {len(self.not_written):,} were not written"
            + (f" and {len(self.uncertain):,} may or may not have been" if self.uncertain else "")
            + ". Its written / not_written / uncertain list the jobs' positions; enqueueing them again is safe."
        )


class RedisOutOfMemory(PartialEnqueue, redis.exceptions.OutOfMemoryError):
    """``perform_async`` was refused, for all its jobs or part of them, because Redis is full.

    Redis answers ``OOM command not allowed when used memory > 'maxmemory'`` when it
    reached ``maxmemory`` under the ``noeviction`` policy (the policy lowkiq needs: see
    docs/redis.md). A push refused that way wrote nothing of its shard's slice, so
    ``not_written`` lists exactly the jobs to enqueue again once Redis has room, and
    ``written`` those that are queued (a PartialEnqueue, whose handling applies as is);
    ``nodes`` names the Redis nodes that refused. It is also redis-py's
    ``OutOfMemoryError``, which a caller may already catch::

        try:
            OrdersWorker.perform_async(jobs)
        except lowkiq.RedisOutOfMemory as exc:
            backlog.extend(jobs[i] for i in exc.not_written + exc.uncertain)  # retry later
    """

    def __init__(self, queue_name: str, written: Sequence[int], not_written: Sequence[int],
                 uncertain: Sequence[int], cause: BaseException, nodes: Sequence[str]) -> None:
        self.nodes = list(nodes)
        super().__init__(queue_name, written, not_written, uncertain, cause)
        total = len(self.written) + len(self.not_written) + len(self.uncertain)
        self.args = (
            f"perform_async on queue {queue_name!r} wrote {len(self.written):,} of {total:,} jobs: Redis is out of "
            f"memory (used memory > 'maxmemory') at {', '.join(self.nodes) or 'its primary'} and refused the "
            f"rest; {len(self.not_written):,} were not written"
            + (f" and {len(self.uncertain):,} may or may not have been" if self.uncertain else "")
            + ". Its not_written lists their positions: enqueue them again once Redis has room (let the servers "
            "drain the queues, empty the morgue, or raise maxmemory); an equal payload merges, so that is safe.",
        )


class LayoutMismatch(LowkiqError):
    """This process splits a queue into another number of shards than the one recorded in Redis.

    Two layouts at once would hash one id into two shards: the id could run in two places
    and its versions out of order. Nothing was enqueued and no server started.
    """

    def __init__(self, worker_name: str, queue_name: str, here: int, recorded: int) -> None:
        self.worker_name = worker_name
        self.queue_name = queue_name
        self.here = here
        self.recorded = recorded
        super().__init__(
            f"{worker_name}: shards_count is {here} here, but queue {queue_name!r} is split into {recorded} "
            f"shards in Redis (recorded by the producers and servers that used it first). Give every process the "
            f"same shards_count; to change the layout on purpose, stop its servers and producers, drain the queue, "
            f"then run `lowkiq -r APP.py --change-layout {worker_name}` (see docs/operations.md)."
        )


class NotDurable(LowkiqError):
    """``durable_enqueue`` is on and no replica confirmed some of the jobs in time (Redis ``WAIT``).

    Every job was written to its primary; ``unconfirmed`` lists the positions (in the
    list given to ``perform_async``) of the jobs whose primary had no replica
    acknowledge them within ``replica_wait``: a failover now could lose them.
    Enqueueing them again is safe (an equal payload merges).
    """

    def __init__(self, queue_name: str, unconfirmed: Sequence[int], total: int, nodes: Sequence[str]) -> None:
        self.queue_name = queue_name
        self.unconfirmed = list(unconfirmed)
        self.nodes = list(nodes)
        super().__init__(
            f"perform_async on queue {queue_name!r}: no replica of {', '.join(self.nodes)} confirmed "
            f"{len(self.unconfirmed):,} of {total:,} jobs in time (durable_enqueue); they are written to the "
            f"primary but a failover could lose them. Its unconfirmed lists their positions."
        )


class NotConfigured(LowkiqError, RuntimeError):
    pass


class ConfigurationError(LowkiqError, TypeError):
    """``lowkiq.configure(...)`` was given something no server could run, such as a worker class
    without a ``perform`` method (each of its jobs would fail and be retried for about 20 days).
    Nothing was configured; the message names the class and what to fix."""


class EmbeddedRedisError(LowkiqError, RuntimeError):
    pass


class LeaseRefused(LowkiqError):
    """Redis refused a write: the caller no longer holds the shard's lease.

    The write did not happen. The caller must drop the shard, not retry.
    """

    def __init__(self, reason: str, lease_key: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.lease_key = lease_key


class PayloadDecodeError(LowkiqError, ValueError):
    """A payload in Redis that ``load_payload`` cannot read."""


class RegistryFull(LowkiqError):
    """Registering these workers would take the registry past MAX_WORKERS: nothing was written.

    A registered worker stays until an operator forgets it, so the usual cause is workers
    renamed or removed long ago: the console's dashboard marks them stale and forgets them.
    """

    def __init__(self, names: Iterable[str], would_hold: int, limit: int) -> None:
        self.names = sorted(names)
        self.would_hold = would_hold
        self.limit = limit
        shown = ", ".join(self.names[:5]) + (f" and {len(self.names) - 5} more" if len(self.names) > 5 else "")
        super().__init__(
            f"cannot register {shown}: the registry of workers would hold {would_hold:,}, at most {limit:,} "
            f"(lowkiq.store.registry.MAX_WORKERS), so that every console page reads a bounded registry. Nothing was "
            f"registered. Forget workers that are gone (the console marks them stale), or merge queues."
        )


class LayoutChangeRefused(LowkiqError):
    """The layout cannot change now; the message says what to do first."""


class ConfirmationRefused(LowkiqError, ValueError):
    """A confirmation that cannot be used; ``reason`` is "used", "expired", "unknown" or "mismatch"."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class UnknownWorker(LowkiqError, LookupError):
    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"unknown worker {name!r}")
        self.name = name


class BadInput(LowkiqError, ValueError):
    """A query parameter or body the caller must fix: answered with 400 and this message."""


class AppFileError(LowkiqError):
    """The app file is missing, raised while loading, or does not configure lowkiq with workers."""


class PinningError(LowkiqError):
    """The process cannot be held to the CPU asked for (not allowed here, or no such call on this system)."""


class MetricsPortError(LowkiqError):
    """``metrics_port`` cannot be listened on (taken, or not allowed)."""


class NoWorkers(LowkiqError, RuntimeError):
    """A server was started for an app that configures no workers."""


class TimeLimitExceeded(LowkiqError):
    """A perform ran past its worker's ``time_limit`` (seconds).

    Raised inside the running perform (thread isolation: at the next bytecode of Python code;
    a blocking C call is interrupted only when it returns), and stored as the batch's error
    when a process-isolated perform had to be killed ``time_limit_grace`` seconds later.
    The batch fails by the retry rules, like any exception.
    """


class WorkerCrashed(LowkiqError):
    """The child process performing a process-isolated batch died (segfault, OOM kill,
    ``os._exit``) before it answered. The batch fails by the retry rules and each of its
    ids counts one crash toward the crash cap; the server and its other threads go on."""


class PerformStopped(LowkiqError):
    """An operator stopped a process-isolated perform (the console's Stop button,
    ``POST api/v1/workers/<w>/busy/stop``, ``lowkiq jobs stop``): its child process and
    everything it started were killed. The batch fails by the retry rules, like any exception;
    it counts no crash."""


class PartialFailure(LowkiqError):
    """Raised by ``perform``: only the ids named fail, each with its own error and retry
    rules; every other id of the batch is acknowledged as processed. Ids that are not in
    the batch are ignored (and logged)::

        def perform(self, payloads_by_id):
            failures = {}
            for id, payloads in payloads_by_id.items():
                try:
                    apply(id, payloads)
                except Exception as exc:
                    failures[id] = exc
            if failures:
                raise lowkiq.PartialFailure(failures)
    """

    def __init__(self, failures: dict[str, BaseException]) -> None:
        if not isinstance(failures, dict) or not failures:
            raise TypeError("PartialFailure takes a non-empty dict {id: exception}")
        for job_id, exc in failures.items():
            if not isinstance(exc, BaseException):
                raise TypeError(f"PartialFailure: the value for id {job_id!r} must be an exception, got {exc!r}")
        self.failures = {str(job_id): exc for job_id, exc in failures.items()}
        super().__init__(f"{len(self.failures)} ids failed: "
                         + ", ".join(f"{job_id}: {type(exc).__name__}" for job_id, exc in list(self.failures.items())[:5]))
