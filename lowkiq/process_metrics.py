"""A server process's own metrics for Prometheus, served on ``--metrics-port``.

What only the process knows (how long performs take, how big batches are, leases
taken over or lost, outages it lived through) is counted from the runtime's
events; what Redis holds (queue lengths, lag, the morgue) is the console's
``metrics`` route, the same for every process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .events import Event

# Performs run from under a millisecond (a cache write) to minutes (a report).
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
BATCH_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


class ProcessMetrics:
    """An events subscriber that keeps this process's counters in its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.perform_seconds = Histogram("lowkiq_perform_duration_seconds", "Time a batch's perform took (failed ones "
                                         "included)", ["worker", "outcome"], buckets=DURATION_BUCKETS, registry=r)
        self.batch_jobs = Histogram("lowkiq_batch_size_jobs", "Ids per batch taken", ["worker"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.jobs = Counter("lowkiq_process_jobs_total", "Jobs this process performed, by outcome",
                            ["worker", "outcome"], registry=r)
        self.morgued = Counter("lowkiq_process_morgued_jobs_total", "Jobs this process moved to the morgue",
                               ["worker"], registry=r)
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
        self.enqueued = Counter("lowkiq_process_enqueued_jobs_total", "Jobs this process enqueued", ["worker"],
                                registry=r)

    def __call__(self, event: Event) -> None:
        name = event.name
        if name == "batch_taken":
            self.batch_jobs.labels(event["worker"]).observe(len(event["ids"]))
        elif name == "performed":
            self.perform_seconds.labels(event["worker"], "performed").observe(event["seconds"])
            self.jobs.labels(event["worker"], "performed").inc(len(event["ids"]))
        elif name == "failed":
            self.perform_seconds.labels(event["worker"], "failed").observe(event["seconds"])
            self.jobs.labels(event["worker"], "failed").inc(len(event["ids"]))
        elif name == "morgued":
            self.morgued.labels(event["worker"]).inc(len(event["ids"]))
        elif name == "lease_acquired":
            self.acquired.labels(event["worker"]).inc()
            if event["restored"] or event["morgued"]:
                self.takeovers.labels(event["worker"]).inc()
        elif name == "lease_lost":
            self.lost.labels(event["worker"]).inc()
        elif name == "lease_released":
            self.released.labels(event["worker"]).inc()
        elif name == "outage_began":
            self.outages.inc()
            self.in_outage.set(1)
        elif name == "outage_ended":
            self.outage_seconds.inc(event["seconds"])
            self.in_outage.set(0)
        elif name == "enqueued":
            self.enqueued.labels(event["worker"]).inc(event["jobs"])

    def serve(self, port: int, address: str = "") -> None:
        """``GET /metrics`` on ``port`` from a daemon thread (every interface unless ``address`` is given)."""
        start_http_server(port, addr=address or "0.0.0.0", registry=self.registry)
