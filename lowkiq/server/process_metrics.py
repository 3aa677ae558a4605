"""A server process's own metrics for Prometheus, served on ``--metrics-port``.

What only the process knows (how long performs take, how big batches are, leases
taken over or lost, outages it lived through) is counted from the runtime's
events; what Redis holds (queue lengths, lag, the morgue) is the console's
``metrics`` route, the same for every process.

The per-batch numbers (durations, batch sizes, jobs) are counted on the thread that
did the work into that thread's own tally: plain integer and float additions, no lock
and no label lookup on the hot path, where prometheus-client's labelled objects cost
tens of microseconds per job. A scrape sums every thread's tally. Rare events
(leases, outages) use prometheus-client's objects directly.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..events import Event
from .health import Health, serve

# Performs run from under a millisecond (a cache write) to minutes (a report).
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
BATCH_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


class Tally:
    """One thread's counts: histograms as [count per bucket..., count above the last, sum], counters as floats."""

    def __init__(self) -> None:
        self.durations: dict[tuple[str, str], list[float]] = {}  # (worker, outcome)
        self.batches: dict[str, list[float]] = {}  # worker
        self.jobs: dict[tuple[str, str], float] = {}  # (worker, outcome)
        self.enqueued: dict[str, float] = {}  # worker
        self.morgued: dict[str, float] = {}  # worker


def _observe(histogram: dict[Any, list[float]], key: Any, bounds: tuple[float, ...], value: float) -> None:
    counts = histogram.get(key)
    if counts is None:
        counts = histogram[key] = [0.0] * (len(bounds) + 2)
    counts[bisect_left(bounds, value)] += 1
    counts[-1] += value


class TallyCollector(Collector):
    """Every thread's tally, summed when Prometheus scrapes."""

    def __init__(self, tallies: list[Tally]) -> None:
        self.tallies = tallies

    def collect(self) -> Iterator[Metric]:
        tallies = list(self.tallies)
        yield self._histogram("lowkiq_perform_duration_seconds", "Time a batch's perform took (failed ones included)",
                              ["worker", "outcome"], [t.durations for t in tallies], DURATION_BUCKETS)
        yield self._histogram("lowkiq_batch_size_jobs", "Ids per batch taken", ["worker"],
                              [{(k,): v for k, v in list(t.batches.items())} for t in tallies], BATCH_BUCKETS)
        yield self._counter("lowkiq_process_jobs", "Jobs this process performed, by outcome", ["worker", "outcome"],
                            [t.jobs for t in tallies])
        yield self._counter("lowkiq_process_morgued_jobs", "Jobs this process moved to the morgue", ["worker"],
                            [{(k,): v for k, v in list(t.morgued.items())} for t in tallies])
        yield self._counter("lowkiq_process_enqueued_jobs", "Jobs this process enqueued", ["worker"],
                            [{(k,): v for k, v in list(t.enqueued.items())} for t in tallies])

    @staticmethod
    def _histogram(name: str, text: str, labels: list[str], parts: list[dict[Any, list[float]]],
                   bounds: tuple[float, ...]) -> Metric:
        summed: dict[Any, list[float]] = {}
        for part in parts:
            for key, counts in list(part.items()):
                total = summed.setdefault(key, [0.0] * len(counts))
                for i, value in enumerate(list(counts)):
                    total[i] += value
        family = HistogramMetricFamily(name, text, labels=labels)
        for key, counts in sorted(summed.items()):
            cumulative, running = [], 0.0
            for bound, count in zip((*map(str, bounds), "+Inf"), counts[:-1]):
                running += count
                cumulative.append((bound, running))
            family.add_metric(list(key), cumulative, counts[-1])
        return family

    @staticmethod
    def _counter(name: str, text: str, labels: list[str], parts: list[dict[Any, float]]) -> Metric:
        summed: dict[Any, float] = {}
        for part in parts:
            for key, value in list(part.items()):
                summed[key] = summed.get(key, 0.0) + value
        family = CounterMetricFamily(name, text, labels=labels)
        for key, value in sorted(summed.items()):
            family.add_metric(list(key), value)
        return family


class ProcessMetrics:
    """An events subscriber that keeps this process's counters in its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._tallies: list[Tally] = []
        self._local = threading.local()
        self._lock = threading.Lock()  # only to add a thread's tally to the list, once per thread
        r.register(TallyCollector(self._tallies))
        self.acquired = Counter("lowkiq_leases_acquired_total", "Shard leases this process acquired", ["worker"],
                                registry=r)
        self.takeovers = Counter("lowkiq_lease_takeovers_total", "Leases acquired from a process that stopped "
                                 "renewing them (its in-flight batch was restored)", ["worker"], registry=r)
        self.lost = Counter("lowkiq_leases_lost_total", "Leases lost: a write of this process was refused "
                            "(fenced) because another one holds the shard now", ["worker"], registry=r)
        self.released = Counter("lowkiq_leases_released_total", "Leases handed over", ["worker"], registry=r)
        self.outages = Counter("lowkiq_outages_total", "Times Redis stopped answering this process", registry=r)
        self.outage_seconds = Counter("lowkiq_outage_seconds_total", "Time spent in those outages", registry=r)
        self.in_outage = Gauge("lowkiq_outage", "1 while Redis does not answer this process", registry=r)
        # Rare by nature (a perform that ignores TimeLimitExceeded): counted here, not in the thread tallies.
        # The console's lowkiq_performs_over_time_limit says how many run past their limit now.
        self.limit_ignored = Counter("lowkiq_time_limit_ignored_total", "Performs of this process still running a "
                                     "second after TimeLimitExceeded was raised in them (thread isolation)",
                                     ["worker"], registry=r)

    def _tally(self) -> Tally:
        tally: Tally | None = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = Tally()
            with self._lock:
                self._tallies.append(tally)
        return tally

    def __call__(self, event: Event) -> None:
        name = event.name
        fields = event.fields
        if name == "batch_taken":
            _observe(self._tally().batches, fields["worker"], BATCH_BUCKETS, len(fields["ids"]))
        elif name == "performed" or name == "failed":
            tally = self._tally()
            key = (fields["worker"], name)
            if fields["seconds"] is not None:  # None: perform never ran (its payloads could not be loaded)
                _observe(tally.durations, key, DURATION_BUCKETS, fields["seconds"])
            tally.jobs[key] = tally.jobs.get(key, 0.0) + len(fields["ids"])
        elif name == "enqueued":
            tally = self._tally()
            tally.enqueued[fields["worker"]] = tally.enqueued.get(fields["worker"], 0.0) + fields["jobs"]
        elif name == "morgued":
            tally = self._tally()
            tally.morgued[fields["worker"]] = tally.morgued.get(fields["worker"], 0.0) + len(fields["ids"])
        elif name == "time_limit_ignored":
            self.limit_ignored.labels(fields["worker"]).inc()
        elif name == "lease_acquired":
            self.acquired.labels(fields["worker"]).inc()
            if fields["restored"] or fields["morgued"]:
                self.takeovers.labels(fields["worker"]).inc()
        elif name == "lease_lost":
            self.lost.labels(fields["worker"]).inc()
        elif name == "lease_released":
            self.released.labels(fields["worker"]).inc()
        elif name == "outage_began":
            self.outages.inc()
            self.in_outage.set(1)
        elif name == "outage_ended":
            self.outage_seconds.inc(fields["seconds"])
            self.in_outage.set(0)

    def serve(self, port: int, health: Health, address: str = "") -> None:
        """``GET /metrics``, ``/healthz`` and ``/readyz`` on ``port`` from a daemon thread (every interface unless
        ``address`` is given)."""
        serve(port, self.registry, health, address)
