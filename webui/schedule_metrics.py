"""Prometheus metrics of recurring schedules, for the console's /metrics: one read per schedule, pipelined."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..console.schedules import from_app

LABELS = ("schedule", "worker")


class ScheduleCollector(Collector):
    def __init__(self, client: Any) -> None:
        self.client = client

    def collect(self) -> Iterator[Metric]:
        last = GaugeMetricFamily("lowkiq_schedule_last_tick_seconds", "The schedule's last tick enqueued (unix "
                                 "time); absent until its first", labels=LABELS)
        lag = GaugeMetricFamily("lowkiq_schedule_lag_seconds", "How long the schedule's next tick has been due "
                                "without being enqueued (Redis time); 0 when none is, or while paused", labels=LABELS)
        paused = GaugeMetricFamily("lowkiq_schedule_paused", "1 while the schedule is paused, else 0", labels=LABELS)
        board = from_app(self.client)
        rows = board.rows()
        now = board.now() if rows else 0.0
        for row in rows:
            labels = [row.info.name, row.info.worker]
            state = row.state
            if state.last_at is not None:
                last.add_metric(labels, state.last_at)
            due = None if state.mark is None or state.paused else row.info.rule.next_after(state.mark)
            lag.add_metric(labels, max(0.0, now - due) if due is not None else 0.0)
            paused.add_metric(labels, 1 if state.paused else 0)
        yield last
        yield lag
        yield paused
