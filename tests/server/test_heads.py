"""The probe of held shards' heads (lowkiq.server.heads): what each shard answers, in both protocols, and the
second round trip only a shard that still holds seconds scores costs."""

from __future__ import annotations

import pytest
from queue_support import OrdersWorker, held_lease, microseconds, old_producer_push, queue

from lowkiq.server.heads import HeadsProbe
from lowkiq.transport import Transport


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def transport(request, redis_url):
    client = Transport(f"{redis_url}?protocol={request.param}")
    yield client
    client.close()


def shard_of(job_id: str) -> int:
    return queue().shard_of(job_id)


def ids_in_other_shards(count: int) -> list[str]:
    q, out, seen = queue(), [], set()
    assert count <= OrdersWorker.shards_count
    n = 0
    while len(out) < count:
        n += 1
        job_id = f"h{n}"
        if q.shard_of(job_id) not in seen:
            seen.add(q.shard_of(job_id))
            out.append(job_id)
    return out


def probe_of(job_ids: list[str]) -> tuple[HeadsProbe, list]:
    q = queue()
    leases = [held_lease(q, q.shard_of(job_id)) for job_id in job_ids]
    return HeadsProbe(leases), leases


def calls(r, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_each_shard_answers_its_earliest_perform_in_its_next_group_or_none(r, clock, transport):
    plain, grouped, empty = ids_in_other_shards(3)
    now = clock.now
    OrdersWorker.perform_async([{"id": plain, "perform_in": now + 40}])
    OrdersWorker.perform_async([{"id": grouped, "group": "acme", "perform_in": now + 5}])
    probe, _ = probe_of([plain, grouped, empty])
    head, group_head, nothing = probe.read(transport)
    assert head == pytest.approx(now + 40, abs=1e-3)
    group_place = float(r.zrange(queue().keys.shard(shard_of(grouped)).groups_zset, 0, 0, withscores=True)[0][1])
    assert group_head == pytest.approx(group_place, abs=1e-6)
    assert nothing is None


def test_one_round_trip_of_two_reads_per_shard_when_every_score_is_in_microseconds(r, clock, transport):
    job_ids = ids_in_other_shards(3)
    for job_id in job_ids:
        microseconds(job_id)
    OrdersWorker.perform_async([{"id": job_id, "perform_in": clock.now + 10} for job_id in job_ids])
    probe, _ = probe_of(job_ids)
    r.config_resetstat()
    assert all(head is not None for head in probe.read(transport))
    assert calls(r, "zrange") == 2 * len(job_ids)
    assert calls(r, "zrangebyscore") == 0


def test_a_shard_holding_seconds_scores_alone_is_read_again_for_its_earliest_microseconds_one(r, clock, transport):
    old, plain = ids_in_other_shards(2)
    microseconds(old)
    microseconds(plain)
    q = queue()
    now = clock.now
    old_producer_push(r, old, now + 300)  # in seconds, due after a new job of the same shard
    same_shard_new = next(f"{old}-{n}" for n in range(10_000) if q.shard_of(f"{old}-{n}") == q.shard_of(old))
    OrdersWorker.perform_async([{"id": same_shard_new, "perform_in": now + 60},
                                {"id": plain, "perform_in": now + 20}])
    probe, _ = probe_of([old, plain])
    r.config_resetstat()
    mixed, micro_only = probe.read(transport)
    assert mixed == pytest.approx(now + 60, abs=1e-3)
    assert micro_only == pytest.approx(now + 20, abs=1e-3)
    assert calls(r, "zrangebyscore") == 1  # the mixed shard's, not the other's


def test_a_probe_of_no_shards_sends_nothing(r, transport):
    r.config_resetstat()
    assert HeadsProbe([]).read(transport) == []
    assert calls(r, "zrange") == 0
