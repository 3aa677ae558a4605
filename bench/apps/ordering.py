"""bench.ordering's lowkiq side: each id's versions, after 0 to 2 ms of work, recorded in order.

A job is ``{"id": id, "payload": {"v": version, "w": work in ms}, "score": version}``.
A perform receives every version of its id queued since the last one, merged,
oldest first (lowkiq's contract): it does the newest version's work once (the
merged versions are one change of the id's state, as an application would
write them) and then records each version, in order, with the peers' own
script (bench/peers/marks.py, loaded by path: the server does not import the
``bench`` package), so that the counts are the same measurement for everyone.
"""

import importlib.util
import os
import time
from pathlib import Path

import lowkiq

_spec = importlib.util.spec_from_file_location("bench_marks", Path(__file__).resolve().parent.parent / "peers" / "marks.py")
assert _spec is not None and _spec.loader is not None
marks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(marks)


class OrderingWorker(lowkiq.Worker):
    shards_count = int(os.environ.get("BENCH_SHARDS_COUNT", "5"))
    batch_size = 1

    def perform(self, payloads_by_id):
        for job_id, payloads in payloads_by_id.items():
            time.sleep(payloads[-1]["w"] / 1000)
            for payload in payloads:
                marks.apply_version(job_id, payload["v"])


lowkiq.configure(workers=[OrderingWorker])
