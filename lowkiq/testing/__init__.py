"""Testing code that enqueues and performs lowkiq jobs: in the caller, with no Redis (``inline``), or
through the real Redis scripts in the calling thread (``drain``), and a pytest plugin (entry point
``lowkiq``) whose ``lowkiq_redis`` fixture gives each test a flushed private Redis. See docs/testing.md.

Example::

    def test_paid_orders_are_synced(lowkiq_redis):
        OrdersWorker.perform_async([{"id": 42, "payload": {"status": "paid"}}])
        assert lowkiq.testing.drain(OrdersWorker) == {"OrdersWorker": ["42"]}
"""

from __future__ import annotations

from ..worker import Worker
from .inline_jobs import inline
from .results import Drained, DrainFailed, Failure, ShardsHeld

__all__ = ["DrainFailed", "Drained", "Failure", "ShardsHeld", "drain", "inline"]


def drain(*workers: type[Worker], raise_errors: bool = True) -> Drained:
    """Perform every due job of ``workers`` (default: every configured worker) in the calling thread,
    through the real Redis scripts, until none is due; returns ``{worker name: [ids performed, in order]}``.

    Each batch goes as on a server: the shard's lease taken (a shard a server holds raises ShardsHeld),
    ``batch_size`` ids taken, ``perform`` through the server middlewares, then acknowledged, or failed:
    each failed id in its retry state (``retry_count``, ``perform_in = now + retry_in``), or, its retries
    exhausted, its oldest payload in the morgue and ``retries_exhausted`` called. A retry due at once is
    performed again in the same drain; jobs whose ``perform_in`` is later (scheduled, or retried later) are
    left. Workers with ``isolation = "process"`` perform in the calling thread too; a paused queue is drained
    all the same. "Now" is Redis's clock (or the clock lowkiq was configured with).

    A failure does not stop the drain: every due job is performed first. Then, with ``raise_errors``
    (the default), ``DrainFailed`` is raised, its cause the first failure's exception; with
    ``raise_errors=False`` the failures are in the result's ``failures``. An id that failed is not in
    the lists of ids performed.

    Example::

        OrdersWorker.perform_async([{"id": 1}, {"id": 2, "perform_in": time.time() + 60}])
        assert lowkiq.testing.drain(OrdersWorker) == {"OrdersWorker": ["1"]}
    """
    # At call time: the server's modules are needed only here, and the pytest plugin imports this package.
    from .draining import drain as run

    return run(*workers, raise_errors=raise_errors)
