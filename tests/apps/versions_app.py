"""The app of the lease fault tests: versions of hot ids, each perform recorded with its interval.

Environment: APP_SHARDS, APP_BATCH_SIZE, APP_PERFORM_SECONDS (mean sleep per perform), APP_HANG=1 (this
process sleeps in a perform whose payload says "hang"), APP_ISOLATION ("thread"; "process": this server
performs in child processes). A payload {"crash": true} SIGKILLs its process (with process isolation, the
child). Each record names the process's parent, so that a child's performs can be told to its server.
"""

from __future__ import annotations

import os
import random
import signal
import time

from recorder import record

import lowkiq

SHARDS = int(os.environ.get("APP_SHARDS", "12"))
BATCH = int(os.environ.get("APP_BATCH_SIZE", "2"))
SLEEP = float(os.environ.get("APP_PERFORM_SECONDS", "0.02"))
HANG = os.environ.get("APP_HANG") == "1"


class Versions(lowkiq.Worker):
    shards_count = SHARDS
    batch_size = BATCH
    max_retry_count = 1000
    isolation = os.environ.get("APP_ISOLATION", "thread")

    def retry_in(self, retry_count: int) -> float:
        return 0.1

    def perform(self, payloads_by_id):
        start = time.time()
        record("start", worker="Versions", batch=payloads_by_id, start=start)
        for payloads in payloads_by_id.values():
            for payload in payloads:
                if payload.get("crash"):
                    os.kill(os.getpid(), signal.SIGKILL)
                if HANG and payload.get("hang"):
                    time.sleep(payload["hang"])
        time.sleep(SLEEP * 2 * random.random())
        record("perform", worker="Versions", batch=payloads_by_id, start=start, end=time.time(),
               token=list(lowkiq.context().fencing_token), parent=os.getppid())


lowkiq.configure(workers=[Versions])
