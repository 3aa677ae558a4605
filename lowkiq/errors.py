"""Errors a producer may need to tell apart."""

from __future__ import annotations

from collections.abc import Sequence

import redis


class PartialEnqueue(Exception):
    """``perform_async`` wrote some jobs and not others: Redis failed for part of the call.

    Each push script writes one shard's slice of the call atomically, so every
    job is in exactly one of ``written``, ``not_written`` or ``uncertain`` (its
    script's reply was lost: written or not), each a list of positions in the
    list given to ``perform_async``. Enqueueing again the jobs not known to be
    written, or the whole call, is safe: an equal payload merges into the
    queued job (its lower score is kept)::

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
    README, Redis). A push refused that way wrote nothing of its shard's slice, so
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


class LayoutMismatch(Exception):
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
            f"then run `lowkiq -r APP.py --change-layout {worker_name}` (see README, Operations)."
        )


class NotDurable(Exception):
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
