"""Dramatiq on its Redis broker: ``dramatiq bench.peers.dramatiq_app --processes P --threads T``.

Actors without retries and without a result backend (Dramatiq's default:
nothing is written per message); the CLI's logging at its default level, which
logs nothing per message. ``blank`` counts in the process (one process),
``blank_counted`` in Redis (several processes: the CLI's default is one per
core), ``apply`` is the ordering workload's job.
"""

import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.peers.marks import URL, apply_version, mark, mark_counted

dramatiq.set_broker(RedisBroker(url=URL))


@dramatiq.actor(queue_name="bench", max_retries=0)
def blank(i):
    mark()


@dramatiq.actor(queue_name="bench", max_retries=0)
def blank_counted(i):
    mark_counted()


@dramatiq.actor(queue_name="bench", max_retries=0)
def apply(job_id, version, work):
    time.sleep(work / 1000)
    apply_version(job_id, version)


def produce(n: int, counted: bool = False) -> None:
    actor = blank_counted if counted else blank
    started = time.perf_counter()
    for i in range(n):
        actor.send(i)
    print(time.perf_counter() - started)


def produce_versions(path: str) -> None:
    from bench.peers.marks import send_versions

    send_versions(lambda job_id, version, work: apply.send(job_id, version, work), path)
