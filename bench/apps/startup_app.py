"""The app bench.startup starts: one worker whose perform writes when it began."""

import os
import time

import lowkiq


class Startup(lowkiq.Worker):
    shards_count = 5

    def perform(self, payloads_by_id):
        with open(os.environ["STARTUP_MARKS"], "a") as marks:
            for job_id in payloads_by_id:
                marks.write(f"{job_id} {time.time()}\n")


if os.environ.get("STARTUP_MARKS"):
    lowkiq.configure(workers=[Startup])
