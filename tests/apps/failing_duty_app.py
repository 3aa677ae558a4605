"""A server whose schedule fails at run time on every try: its rule raises when asked for the next tick.

``configure`` accepts the schedule (a valid rule); the app then breaks ``Rule.next_after`` in this process,
as a croniter release with a bug or a rule only a later date trips over would. Its worker ``Plain`` records
every perform, so a test sees whether the server still serves its shards.
"""

from __future__ import annotations

import time

from recorder import record

import lowkiq
from lowkiq.schedule import Rule


class Plain(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        record("perform", worker="Plain", batch=payloads_by_id, start=time.time(), end=time.time())


class Ticks(lowkiq.Worker):
    def perform(self, payloads_by_id):
        record("perform", worker="Ticks", batch=payloads_by_id, start=time.time(), end=time.time())


lowkiq.configure(workers=[Plain, Ticks], schedules=[lowkiq.Schedule("ticks", Ticks, every=1)])


def _broken(self, moment):
    raise RuntimeError("the rule exploded")


Rule.next_after = _broken
