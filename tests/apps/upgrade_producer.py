"""A producer of the upgrade tests: ``python upgrade_producer.py REDIS_URL PREFIX COUNT SECONDS LATER [KILL]``.

Enqueues COUNT payloads over about SECONDS (in slices of 50), every other one grouped: two in three due now,
with ids ``PREFIX-<n % (COUNT // 3)>`` (so ids get several versions), one in three (when LATER) due in 0.5 to
LATER seconds, each with an id of its own. Then moves KILL queued ids to the morgue. Prints a JSON line: the payloads enqueued
({n: [id, due]}), the ids killed and the lowkiq imported. The same file runs under either version of lowkiq (PYTHONPATH decides).
"""

from __future__ import annotations

import json
import random
import sys
import time

from upgrade_app import Upgrade  # beside this file: Python puts a script's folder first on sys.path

import lowkiq


def main() -> None:
    url, prefix, count, seconds, later = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(
        sys.argv[5])
    kill = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    runtime = lowkiq.configure(redis_url=url, workers=[Upgrade])  # the app's own configure, given the URL
    rng = random.Random(prefix)
    ids = max(1, count // 3)
    sent: dict[str, tuple[str, float]] = {}
    slices = max(1, count // 50)
    started = time.time()
    for s in range(slices):
        jobs = []
        for n in range(s * count // slices, (s + 1) * count // slices):
            now = time.time()
            due = now + rng.uniform(0.5, later) if later and n % 3 == 0 else now
            # a job for later has an id of its own: merged into a due id it would run with it, as merging says
            job = {"id": f"{prefix}-{n % ids}", "payload": {"n": f"{prefix}:{n}", "due": due}}
            if due > now:
                job["id"], job["perform_in"] = f"{prefix}-later-{n}", due
            if n % 2:
                job["group"] = f"g{n % 5}"
            jobs.append(job)
            sent[f"{prefix}:{n}"] = (job["id"], due)
        Upgrade.perform_async(jobs)
        pause = started + seconds * (s + 1) / slices - time.time()
        if pause > 0:
            time.sleep(pause)
    killed: list[str] = []
    if kill:
        killed = [f"{prefix}-{i}" for i in range(min(kill, ids))]
        runtime.actions(Upgrade).kill(killed)
    print(json.dumps({"sent": sent, "killed": killed, "lowkiq": lowkiq.__file__}))


if __name__ == "__main__":
    main()
