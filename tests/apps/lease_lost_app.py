"""The app of the lease_lost test: a perform that notices its process was stopped and records what
``lowkiq.context()`` says right after, before anything else of the process could run.

Environment: APP_WAIT=1 (this process's perform of a payload {"wait": true} spins until it sees
that it was stopped, i.e. a 10 ms sleep took over a second; at most 25 s).
"""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

WAIT = os.environ.get("APP_WAIT") == "1"


class Watched(lowkiq.Worker):
    shards_count = 4
    batch_size = 1

    def perform(self, payloads_by_id):
        start = time.time()
        record("start", worker="Watched", batch=payloads_by_id, start=start)
        stopped_for = 0.0
        if WAIT and any(p.get("wait") for ps in payloads_by_id.values() for p in ps):
            give_up = time.monotonic() + 25
            while time.monotonic() < give_up:
                before = time.monotonic()
                time.sleep(0.01)
                stopped_for = time.monotonic() - before
                if stopped_for > 1.0:
                    break
        context = lowkiq.context()
        lost = context.lease_lost  # read first: the keeper thread has not run a renewal since the stop yet
        record("perform", worker="Watched", batch=payloads_by_id, start=start, end=time.time(),
               stopped_for=stopped_for, lease_lost=lost, remaining=context.lease_remaining(),
               token=list(context.fencing_token))


lowkiq.configure(workers=[Watched])
