"""A time limit runs the perform's own ``except`` and ``finally`` blocks, on every Python lowkiq supports.

CPython 3.13 checks for an asynchronous exception at a loop's backward jump, which its compiler leaves
outside the ``try``'s range: raised there, the exception used to skip both blocks (lowkiq.server.process_isolation).
The loops below: two shapes that lost them (a loop on a call's result, a counting loop), and one of short
sleeps (the exception comes as a sleep returns).
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import pytest
from timing_support import wait_until

import lowkiq
from lowkiq.server import Server

RUNS = 20
LIMIT = 0.1
LOOPS = ("call", "count", "sleep")


class Limited(lowkiq.Worker):
    shards_count = 4
    time_limit = LIMIT
    loop: ClassVar[str] = "call"
    records: ClassVar[list[tuple[str, str]]] = []

    def retry_in(self, retry_count: int) -> float:
        return 3600.0  # each id fails once within the test, and waits with its error

    def perform(self, payloads_by_id: dict[str, list[Any]]) -> None:
        (job_id,) = payloads_by_id
        # The loops are written out here, in the frame of the try: the exception skipped the handlers of
        # the frame whose backward jump it was raised at (a loop in a function called here would not show it).
        end = time.monotonic() + 5.0
        try:
            if self.loop == "call":
                while time.monotonic() < end:
                    pass
            elif self.loop == "count":
                n = 0
                while n < 10**10:
                    n += 1
            else:
                while time.monotonic() < end:
                    time.sleep(0.01)
        except lowkiq.TimeLimitExceeded:
            self.records.append((job_id, "except"))
            raise
        finally:
            self.records.append((job_id, "finally"))


@pytest.mark.parametrize("loop", LOOPS)
def test_every_time_limit_runs_the_performs_except_and_finally(configure, loop):
    Limited.loop = loop
    Limited.records = []
    runtime = configure(workers=[Limited], threads_per_node=4, poll_interval=0.05, heartbeat_interval=0.2, settle=0.2)
    runtime.clock = time.time
    ids = [f"job{i}" for i in range(RUNS)]
    Limited.perform_async([{"id": job_id} for job_id in ids])
    server = Server(runtime)
    exits: list[int] = []
    thread = threading.Thread(target=lambda: exits.append(server.run(handle_signals=False)))
    thread.start()
    try:
        queries = runtime.queries(Limited)
        wait_until(lambda: all((job := queries.job(job_id)) and job.error for job_id in ids), timeout=20)
    finally:
        server.shutdown()
        thread.join(10)
    assert exits == [0]
    for job_id in ids:
        # Both blocks, once each: the exception landed inside the try, not past it nor inside a handler.
        assert [what for who, what in Limited.records if who == job_id] == ["except", "finally"], job_id
        assert queries.job(job_id).error.startswith("TimeLimitExceeded: the perform ran past its time_limit")
