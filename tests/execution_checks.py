"""What the lease fault tests check in the execution log of every server process.

- lost: an enqueued (id, version) never performed and not in the morgue;
- duplicates: an (id, version) performed more than once;
- overlaps: ids with two perform intervals that intersect (any processes, any threads);
- order: ids where a version was first performed after a higher one, or a perform got its
  versions out of order.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from server_support import records


@dataclass
class Report:
    lost: set[tuple[str, int]]
    duplicates: set[tuple[str, int]]
    overlaps: set[str]
    order: set[str]
    performs: int

    def __str__(self) -> str:
        def few(items: set[Any]) -> str:
            return f"{len(items)} {sorted(items)[:10]}"

        return (f"{self.performs} performs; lost {few(self.lost)}; duplicates {few(self.duplicates)}; "
                f"overlaps {few(self.overlaps)}; order {few(self.order)}")


def check(tmp, enqueued: set[tuple[str, int]], morgue: set[tuple[str, int]] = frozenset()) -> Report:  # type: ignore[assignment]
    performs = [r for r in records(tmp, "perform") if r.get("worker") == "Versions"]
    counts: Counter[tuple[str, int]] = Counter()
    intervals: dict[str, list[tuple[float, float]]] = {}
    order: set[str] = set()
    by_id: dict[str, list[tuple[float, list[int]]]] = {}
    for rec in performs:
        for job_id, payloads in rec["batch"].items():
            versions = [p["v"] for p in payloads if isinstance(p, dict) and "v" in p]
            counts.update((job_id, v) for v in versions)
            intervals.setdefault(job_id, []).append((rec["start"], rec["end"]))
            by_id.setdefault(job_id, []).append((rec["start"], versions))
            if versions != sorted(versions):
                order.add(job_id)
    overlaps = set()
    for job_id, spans in intervals.items():
        spans.sort()
        latest_end = float("-inf")
        for start, end in spans:
            if start < latest_end:
                overlaps.add(job_id)
            latest_end = max(latest_end, end)
    for job_id, runs in by_id.items():
        seen: set[int] = set()
        highest = float("-inf")
        for _, versions in sorted(runs, key=lambda run: run[0]):
            for v in versions:
                if v not in seen:
                    if v < highest:
                        order.add(job_id)
                    seen.add(v)
                    highest = max(highest, v)
    performed = set(counts)
    return Report(
        lost=set(enqueued) - performed - set(morgue),
        duplicates={k for k, c in counts.items() if c > 1},
        overlaps=overlaps,
        order=order,
        performs=len(performs),
    )


@dataclass
class Producer:
    """Enqueues rising versions of a few hot ids from a thread, until stopped."""

    worker: Any
    ids: int = 20
    every: float = 0.01
    enqueued: set[tuple[str, int]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Producer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        versions: Counter[str] = Counter()
        rng = random.Random(7)
        while not self._stop.is_set():
            job_id = f"hot{rng.randrange(self.ids)}"
            versions[job_id] += 1
            v = versions[job_id]
            self.worker.perform_async([{"id": job_id, "payload": {"v": v}, "score": v}])
            self.enqueued.add((job_id, v))
            time.sleep(self.every)

    def stop(self) -> set[tuple[str, int]]:
        self._stop.set()
        if self._thread is not None:  # stopping one never started (a test failed first) is a no-op
            self._thread.join(5)
        return self.enqueued
