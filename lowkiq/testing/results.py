"""What ``lowkiq.testing.drain`` returns, and raises when a perform failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LowkiqError


@dataclass(frozen=True)
class Failure:
    """One batch that failed while draining, as a server fails it: each of ``ids`` is back in the queue
    in its retry state, or (its retries exhausted) its oldest payload is in the morgue: ``morgued``."""

    worker: str
    ids: list[str]
    exception: BaseException
    morgued: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        dead = f" ({', '.join(self.morgued)} to the morgue)" if self.morgued else ""
        return f"{self.worker} ids {self.ids}: {type(self.exception).__name__}: {self.exception}{dead}"


class Drained(dict[str, list[str]]):
    """``{worker name: [ids performed, in order]}``: every worker drained, with the ids whose perform
    succeeded; ``failures`` lists the batches that failed, in order."""

    def __init__(self, names: list[str]) -> None:
        super().__init__((name, []) for name in names)
        self.failures: list[Failure] = []


class DrainFailed(LowkiqError):
    """``drain`` performed every due job, and some of them failed: ``drained`` holds what was performed and
    the failures (each failed job is in its retry state or the morgue, as a server leaves it). The first
    failure's exception is the ``__cause__``, so its traceback shows above this one."""

    def __init__(self, drained: Drained) -> None:
        self.drained = drained
        failures = drained.failures
        shown = "; ".join(str(failure) for failure in failures[:5])
        more = f"; ... {len(failures) - 5} more" if len(failures) > 5 else ""
        batches = "1 batch" if len(failures) == 1 else f"{len(failures)} batches"
        super().__init__(f"{batches} failed while draining: {shown}{more} "
                         f"(drain(..., raise_errors=False) returns them in .failures instead)")


class ShardsHeld(LowkiqError):
    """``drain`` found shards of its workers held by another process (a server serving them): it performs
    only what no server holds, and took nothing. ``shards``: (shard, owner or None) of each."""

    def __init__(self, shards: list[tuple[str, str | None]]) -> None:
        self.shards = shards
        shown = ", ".join(f"{shard} (held by {owner})" if owner else f"{shard} (no replica confirmed the grant)"
                          for shard, owner in shards[:5])
        more = f", ... {len(shards) - 5} more" if len(shards) > 5 else ""
        super().__init__(f"drain cannot take {len(shards)} shards: {shown}{more}; stop the servers of these workers "
                         f"first, or drain other workers")
