"""Redis's clock as seen from this process: when to look for due work.

Every process reads "now" from the same Redis, so servers on hosts whose clocks
disagree still agree on when a job or a tick is due. A server learns Redis's
time from replies it gets anyway (the keeper's heartbeat, once a second) and
keeps the offset to its own monotonic clock, which no one sets: waits computed
from it follow Redis's time, never the host's wall clock, whatever NTP or an
operator does to the latter.
"""

from __future__ import annotations

import threading
import time


class RedisClock:
    """``now()``: Redis's unix time, estimated from the last observation and the monotonic clock since."""

    def __init__(self) -> None:
        self._offset: float | None = None
        self._lock = threading.Lock()

    @property
    def synced(self) -> bool:
        return self._offset is not None

    def observe(self, redis_seconds: float, sent: float, received: float) -> None:
        """A reply read at monotonic ``received`` to a request sent at ``sent`` said Redis's time was
        ``redis_seconds``: Redis read it somewhere in between. Taken as read at ``received``, the latest it
        can have been, so the estimate is never ahead of Redis (it lags by at most the round trip): a request
        held up by a ``CLIENT PAUSE`` or a busy Redis is answered at its end, and the half-way guess ran
        ahead by half the hold-up."""
        with self._lock:
            self._offset = redis_seconds - received

    def now(self) -> float:
        """Redis's time now; the host's own until a first observation (nothing is due before it anyway)."""
        offset = self._offset
        if offset is None:
            return time.time()
        return time.monotonic() + offset

    def monotonic_at(self, redis_seconds: float) -> float:
        """The monotonic time at which Redis's clock reads ``redis_seconds``."""
        offset = self._offset
        if offset is None:
            return time.monotonic() + (redis_seconds - time.time())
        return redis_seconds - offset
