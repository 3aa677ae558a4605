"""RQ's jobs, importable by RQ's worker processes (``bench.peers.rq_jobs.<name>``).

``blank(i, last)``: jobs run first-in first-out on one worker, so job 0 marks
the start and the job numbered ``last`` the end (bench:first, bench:last), even
in the forking worker where nothing survives from one job to the next.
``blank_counted``: the same for a pool of workers, counted in Redis.
``apply``: the ordering workload's job.
"""

import time

from bench.peers.marks import apply_version, client, mark_counted


def blank(i, last):
    if i == 0 or i == last:
        client().set("bench:first" if i == 0 else "bench:last", repr(time.time()))


def blank_counted(i):
    mark_counted()


def apply(job_id, version, work):
    time.sleep(work / 1000)
    apply_version(job_id, version)


def produce(n, counted=False):
    """n jobs in pipelines of 10,000 (``Queue.enqueue_many``), results not kept (``result_ttl=0``)."""
    from redis import Redis
    from rq import Queue

    from bench.peers.marks import URL

    client = Redis.from_url(URL)
    queue = Queue("bench", connection=client)
    started = time.perf_counter()
    for start in range(0, n, 10_000):
        with client.pipeline() as pipe:
            queue.enqueue_many([Queue.prepare_data(blank_counted if counted else blank,
                                                   args=(i,) if counted else (i, n - 1), result_ttl=0)
                                for i in range(start, min(n, start + 10_000))], pipeline=pipe)
            pipe.execute()
    print(time.perf_counter() - started)


def produce_versions(path):
    from redis import Redis
    from rq import Queue

    from bench.peers.marks import URL, send_versions

    queue = Queue("bench", connection=Redis.from_url(URL))
    send_versions(lambda job_id, version, work: queue.enqueue(apply, job_id, version, work, result_ttl=0), path)
