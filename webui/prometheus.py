"""``GET metrics``: what Redis holds about every queue, in Prometheus's text format.

The numbers are the dashboard's, read the same way (every shard of every worker and the
live servers in one round trip), so any console replica answers the same and a scrape
costs what a dashboard refresh costs. What only a server process knows (perform
durations, leases it took over) is on its own ``--metrics-port`` (``process_metrics``).

A scrape reads as a dashboard refresh does, within the console's budget of shards: a worker
past it has no series in that scrape (``lowkiq_workers_not_measured`` counts them), rather
than zeros that would read as an empty queue.

Each scrape builds a fresh registry around one collector holding what was just read: a
long-lived gauge would keep the series of a worker that is gone, and the global registry
would mix in the console process's own Python metrics. Redis is read before anything is
written, so a Redis that does not answer gives a 503, never half an exposition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from flask import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..console import Console, WorkerView
from ..console.scrape import Reading, read, shards_served
from ..console.terms import QueueMetrics
from .blueprint import bp
from .schedule_metrics import ScheduleCollector
from .state import console, settings

WORKER_LABELS = ("worker", "queue")

# name, help, value: one series per worker each.
QUEUE_GAUGES: tuple[tuple[str, str, Callable[[QueueMetrics], float]], ...] = (
    ("lowkiq_queue_length", "Ids in the queue, due or not (fresh + retries)", lambda m: m.length),
    ("lowkiq_queue_fresh", "Ids in the queue that never failed", lambda m: m.fresh),
    ("lowkiq_queue_retries", "Ids in the queue waiting for a retry", lambda m: m.retries),
    ("lowkiq_morgue_length", "Ids in the morgue (dead, until an operator acts)", lambda m: m.morgue_length),
    ("lowkiq_busy", "Ids in processing: taken by a server, not yet acked or failed", lambda m: m.busy),
    ("lowkiq_lag_seconds", "How long the most overdue queued job has been due; 0 when none is", lambda m: m.lag),
    ("lowkiq_paused", "1 while the worker's queue is paused (servers take nothing from it), else 0",
     lambda m: 0 if m.paused is None else 1),
)
QUEUE_COUNTERS: tuple[tuple[str, str, Callable[[QueueMetrics], float]], ...] = (
    # Read from Redis: they fall (a counter reset to Prometheus) if Redis loses its data or the queue
    # is laid out again with fewer shards.
    ("lowkiq_processed_total", "Ids performed successfully, by every server, as counted in Redis",
     lambda m: m.processed),
    ("lowkiq_failed_total", "Ids whose perform raised, by every server (each retry counts), as counted in Redis",
     lambda m: m.failed),
    ("lowkiq_dropped_payloads_total", "Payloads a per-id cap dropped (max_payloads_per_id with payload_overflow "
     "drop_oldest); 0 without a cap", lambda m: m.dropped),
)


class QueueCollector(Collector):
    def __init__(self, reading: Reading, *, per_shard: bool) -> None:
        self.reading = reading
        self.per_shard = per_shard

    def collect(self) -> Iterator[Metric]:
        reading = self.reading
        rows = [(view, m) for view, m in reading.rows if m.measured]
        for name, text, value in QUEUE_GAUGES:
            gauge = GaugeMetricFamily(name, text, labels=WORKER_LABELS)
            for view, m in rows:
                gauge.add_metric(_labels(view), value(m))
            yield gauge
        for name, text, value in QUEUE_COUNTERS:
            counter = CounterMetricFamily(name, text, labels=WORKER_LABELS)
            for view, m in rows:
                counter.add_metric(_labels(view), value(m))
            yield counter

        held = GaugeMetricFamily("lowkiq_held_ids", "Dead ids the morgue holds (morgue_policy whole_id): payloads "
                                 "enqueued for them wait there until an operator acts; 0 for other workers",
                                 labels=WORKER_LABELS)
        for view, m in rows:
            held.add_metric(_labels(view), m.morgue_length if view.info.holds_dead_ids else 0)
        yield held
        # Only workers with a time_limit have the series: for the others "over it" means nothing.
        over = GaugeMetricFamily("lowkiq_performs_over_time_limit", "Performs running past the worker's time_limit "
                                 "now (a thread-isolated one that ignores TimeLimitExceeded keeps its shard)",
                                 labels=WORKER_LABELS)
        for view, _ in rows:
            if view.name in reading.over_time_limit:
                over.add_metric(_labels(view), reading.over_time_limit[view.name])
        yield over

        yield from _group_gauges(rows)

        shards = GaugeMetricFamily("lowkiq_shards", "Shards of the worker's queue", labels=WORKER_LABELS)
        # From the live servers' heartbeats (a second old at most), as the dashboard's "no server" warning:
        # reading every shard's lease would cost a second round trip.
        owned = GaugeMetricFamily("lowkiq_shards_owned", "Shards whose lease a live server held at its last "
                                  "heartbeat", labels=WORKER_LABELS)
        served = shards_served(reading, [view for view, _ in rows])
        for view, _ in rows:
            shards.add_metric(_labels(view), view.info.shards_count)
            owned.add_metric(_labels(view), served[view.info.queue_name])
        yield shards
        yield owned

        if self.per_shard:
            lag = GaugeMetricFamily("lowkiq_shard_lag_seconds", "How long the shard's most overdue queued job has "
                                    "been due; 0 when none is", labels=(*WORKER_LABELS, "shard"))
            for view, m in rows:
                for index, shard in enumerate(m.shards):
                    lag.add_metric([*_labels(view), str(index)], shard.lag(reading.now))
            yield lag

        yield GaugeMetricFamily("lowkiq_servers_live", "Server processes with a live heartbeat",
                                value=len(reading.members))
        yield GaugeMetricFamily("lowkiq_workers_not_measured", "Workers this scrape did not read: one read visits "
                                "a bounded number of shards (CONSOLE_SHARD_BUDGET) and they did not fit",
                                value=len(reading.rows) - len(rows))
        yield GaugeMetricFamily("lowkiq_workers_broken", "Registry entries the console cannot use (see the "
                                "dashboard for each one's problem)", value=reading.broken)
        yield GaugeMetricFamily("lowkiq_scrape_duration_seconds", "Time this scrape spent reading Redis",
                                value=reading.seconds)


def _group_gauges(rows: list[tuple[WorkerView, QueueMetrics]]) -> Iterator[Metric]:
    """Per group of workers with grouped ids queued: at most 21 series per worker each (the 20 biggest groups and
    "(other)", store/group_metrics.py), however many groups (tenants) a queue holds."""
    labels = (*WORKER_LABELS, "group")
    length = GaugeMetricFamily("lowkiq_group_length", "Ids of the group in the worker's queue, due or not: the 20 "
                               "biggest groups, the other grouped ids summed as group=\"(other)\"", labels=labels)
    lag = GaugeMetricFamily("lowkiq_group_lag_seconds", "How long the group's most overdue queued job has been "
                            "due; 0 when none is (\"(other)\": the largest the read saw among the other groups)",
                            labels=labels)
    for view, m in rows:
        for group in m.groups:
            length.add_metric([*_labels(view), group.name], group.length)
            lag.add_metric([*_labels(view), group.name], group.lag)
    yield length
    yield lag


def _labels(view: WorkerView) -> list[str]:
    return [view.name, view.info.queue_name]


def exposition(c: Console, *, per_shard: bool) -> bytes:
    registry = CollectorRegistry()
    registry.register(QueueCollector(read(c), per_shard=per_shard))
    registry.register(ScheduleCollector(c.client))
    return generate_latest(registry)


@bp.get("/metrics")
def metrics() -> Response:
    body = exposition(console(), per_shard=settings().metrics_per_shard)
    return Response(body, content_type=CONTENT_TYPE_LATEST)
