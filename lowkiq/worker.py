"""The base class users subclass: one worker, one queue."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from . import fairness
from .errors import ConfigurationError
from .jobs import MorgueJob
from .spec import ISOLATIONS as ISOLATIONS
from .spec import MORGUE_POLICIES as MORGUE_POLICIES
from .spec import Shard as Shard
from .spec import WorkerSpec
from .spec import is_async as is_async  # re-exported: configure and the server ask it here
from .spec import is_coroutine as is_coroutine
from .store.keys import QueueKeys

OVERFLOW_POLICIES = ("drop_oldest", "reject")


class Worker(WorkerSpec):
    """Processing logic for one queue.

    Example::

        class OrdersWorker(lowkiq.Worker):
            shards_count = 24
            batch_size = 10

            def perform(self, payloads_by_id):
                for id, payloads in payloads_by_id.items():
                    sync_order(id, payloads[-1])

        OrdersWorker.perform_async([{"id": 42, "payload": {"status": "paid"}}])
    """

    # shards_count (5), batch_size (1), max_retry_count (25), queue_name (the class's name), time_limit
    # (None), isolation ("thread") and morgue_policy ("oldest_payload") are declared and checked in
    # lowkiq.spec.WorkerSpec: the registry records them, and checks them again when it reads them.
    # None (the default): an id keeps every payload, as nothing enqueued is ever dropped unasked. A cap is
    # opt-in: past it, "drop_oldest" keeps the newest ones (counted, shown and logged as dropped), "reject"
    # makes perform_async raise and write nothing of that slice.
    max_payloads_per_id: ClassVar[int | None] = None
    payload_overflow: ClassVar[str] = "drop_oldest"
    # Keeping ordered work flowing (docs/keeping-work-flowing.md): under process isolation, a perform is
    # killed time_limit_grace seconds past its time_limit, and a child is recycled after so many batches or
    # so much memory.
    time_limit_grace: ClassVar[float] = 5.0
    max_batches_per_child: ClassVar[int | None] = None
    max_memory_per_child: ClassVar[int | None] = None  # MiB of the child's peak resident memory
    # Fairness and flow control (docs/fairness.md): threads take from higher-priority workers' ready shards
    # first; debounce (seconds) moves a not-yet-started id's perform_in on each merge, up to debounce_max
    # (default 10 x debounce) after its oldest queued payload; group limits apply to jobs with a group.
    priority: ClassVar[int] = 0
    debounce: ClassVar[float | None] = None
    debounce_max: ClassVar[float | None] = None
    group_concurrency: ClassVar[int | None] = None
    group_rate_limit: ClassVar[tuple[int, float] | None] = None
    # Each id's history (docs/history.md): how many of its shard's latest events each shard keeps (0: no
    # history, nothing written for it), and for how long at most (seconds).
    history_length: ClassVar[int] = 10_000
    history_max_age: ClassVar[float] = 7 * 24 * 3600
    # Take-ahead (docs/take-ahead.md): a batch_size 1 worker's thread takes up to this many due ids of its
    # shard in one call and performs them one per perform, in order, as many as its recent perform time fits
    # in 50 ms. 1 turns it off.
    take_ahead: ClassVar[int] = 16

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)  # WorkerSpec: the names, shards, batch, retries and policies
        cap = cls.max_payloads_per_id
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"{cls.__name__}.max_payloads_per_id must be a positive int or None, got {cap!r}")
        if cls.payload_overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"{cls.__name__}.payload_overflow must be one of {', '.join(OVERFLOW_POLICIES)}, "
                             f"got {cls.payload_overflow!r}")
        _check_flow_attributes(cls)
        _check_history(cls)
        _check_take_ahead(cls)
        fairness.check(cls)

    def retry_in(self, retry_count: int) -> float:
        """Seconds until the next try: 15, 16, 31, 96, 271, ... plus jitter (25 retries ~ 20 days)."""
        return retry_count**4 + 15 + random.randint(0, 29) * (retry_count + 1)

    def perform(self, payloads_by_id: Mapping[str, list[Any]]) -> None:
        """Process ``{id: [payload, ...]}``; payloads ascend by score (oldest first)."""
        raise NotImplementedError(f"{type(self).__name__}.perform is not defined")

    def retries_exhausted(self, batch: Sequence[MorgueJob]) -> None:
        """Called with the jobs that just moved to the morgue."""

    @classmethod
    def perform_async(cls, jobs: Sequence[Mapping[str, Any]]) -> int:
        """Enqueue jobs; returns how many distinct ids were written.

        The whole batch is validated first: a bad job raises TypeError or
        ValueError naming its index, and nothing is written.
        """
        # At call time: the runtime names Worker in its own types (and reaches config.py and schedule.py, which
        # check Worker classes), and a Worker is defined before anything is configured. The one import cycle
        # of the core is this, on purpose.
        from .runtime import enqueue

        return enqueue(cls, jobs)

    @classmethod
    async def aperform_async(cls, jobs: Sequence[Mapping[str, Any]]) -> int:
        """``perform_async`` for asyncio code: the same validation, merge, count and errors, without
        blocking the event loop.

        Example::

            @app.post("/orders/{order_id}")
            async def paid(order_id: int) -> dict:
                await OrdersWorker.aperform_async([{"id": order_id, "payload": {"status": "paid"}}])
                return {"queued": True}
        """
        from .runtime import aenqueue

        return await aenqueue(cls, jobs)

    @classmethod
    def keys(cls) -> QueueKeys:
        return QueueKeys(cls.queue_name, cls.shards_count)


def check_perform(cls: type[Worker]) -> None:
    """Refuse a worker class that does not define ``perform``.

    Worker's own ``perform`` only raises: a server would take each job, fail it and retry it
    for about 20 days before anyone noticed. Checked by ``configure``, not at class definition,
    so that a base class shared by several workers may leave it to its subclasses.
    """
    perform = getattr(cls, "perform", None)
    if perform is Worker.perform:
        raise ConfigurationError(
            f"{cls.__name__} has no perform method: define perform(self, payloads_by_id) in it (without one, "
            f"a server would fail each of its jobs and retry it for about 20 days)")
    if not callable(perform):
        raise ConfigurationError(f"{cls.__name__}.perform must be a method taking payloads_by_id, got {perform!r}")
    if is_async(cls):
        # An async worker's perform and retries_exhausted are awaited on the server's event loop; retry_in
        # is asked while a batch's failure is written, off the loop, and must answer at once.
        refuse_coroutine(getattr(cls, "retry_in", None), f"{cls.__name__}.retry_in")
        if cls.isolation == "process":
            raise ConfigurationError(
                f"{cls.__name__}.perform is a coroutine function (async def), which isolation = \"process\" "
                f"cannot run: a child process performs one batch at a time in a thread, with no event loop. "
                f"Use isolation = \"thread\" (the default) for an async worker, or make perform a plain def")
        return
    for hook in ("perform", "retries_exhausted", "retry_in"):
        refuse_coroutine(getattr(cls, hook, None), f"{cls.__name__}.{hook}")


def refuse_coroutine(fn: Any, where: str) -> None:
    """Refuse an ``async def`` where lowkiq would call it without awaiting it: its work would silently not run
    (a perform's jobs counted as processed while its body never ran)."""
    if is_coroutine(fn):
        raise ConfigurationError(
            f"{where} is a coroutine function (async def): lowkiq calls it from a thread and would never await it, "
            f"so its work would silently not run. Make it a plain def (e.g. run your coroutine with "
            f"asyncio.run(...) inside it)")


def _check_history(cls: type[Worker]) -> None:
    name, length, age = cls.__name__, cls.history_length, cls.history_max_age
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"{name}.history_length must be an int >= 0 (0: keep no history), got {length!r}")
    if isinstance(age, bool) or not isinstance(age, (int, float)) or not math.isfinite(age) or age <= 0:
        raise ValueError(f"{name}.history_max_age must be a positive number of seconds, got {age!r}")


# Ids taken ahead at most (Worker.take_ahead): past a few dozen a take saves nothing more per job, and a crash
# of the server would put more ids back.
MAX_TAKE_AHEAD = 64


def _check_take_ahead(cls: type[Worker]) -> None:
    value = cls.take_ahead
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TAKE_AHEAD:
        raise ValueError(f"{cls.__name__}.take_ahead must be an int 1..{MAX_TAKE_AHEAD} (due ids a batch_size 1 "
                         f"worker's thread takes in one call and performs one at a time; 1 turns take-ahead off), "
                         f"got {value!r}")


def _check_flow_attributes(cls: type[Worker]) -> None:
    """time_limit_grace and max_*_per_child, at class definition (time_limit, isolation and morgue_policy: WorkerSpec)."""
    name = cls.__name__
    grace = cls.time_limit_grace
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not math.isfinite(grace):
        raise TypeError(f"{name}.time_limit_grace must be a number of seconds, got {grace!r}")
    if grace < 0:
        raise ValueError(f"{name}.time_limit_grace must be zero or more, got {grace!r}")
    for attr in ("max_batches_per_child", "max_memory_per_child"):
        value = getattr(cls, attr)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}.{attr} must be a positive int or None, got {value!r}")
        if value < 1:
            raise ValueError(f"{name}.{attr} must be a positive int or None, got {value!r}")
