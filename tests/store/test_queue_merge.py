"""Every row of SPEC's merge table, and "an equal payload keeps the lower score" in any order."""

import itertools
import json

import msgpack
import pytest
from queue_support import OrdersWorker, actions, fail, held_lease, queue, queued, take

T = 1_700_000_000.0


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def make_failed_job(job_id, payloads, clock, next_perform_in):
    """A job that ran once and failed: retry_count 0, perform_in next_perform_in."""
    OrdersWorker.perform_async([{"id": job_id, "payload": p, "score": s} for p, s in payloads])
    take(job_id)
    fail(job_id, next_perform_in)


def test_spec_example_new_job_into_a_queued_job(clock):
    # queued {id 1, payloads {v1:1, v2:2}, retry_count 0, perform_in T}
    make_failed_job("1", [("v1", 1), ("v2", 2)], clock, next_perform_in=T)
    # plus new {id 1, payloads {v2:3, v3:4}, retry_count -1, perform_in T+2}
    OrdersWorker.perform_async([{"id": 1, "payload": "v2", "score": 3, "perform_in": T + 2},
                                {"id": 1, "payload": "v3", "score": 4, "perform_in": T + 2}])
    job = queued("1")
    assert job.payloads == [("v1", 1.0), ("v2", 2.0), ("v3", 4.0)]
    assert job.retry_count == 0
    assert job.perform_in == T


def test_new_job_without_queued_job_uses_its_own_values(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "v1", "score": 1, "perform_in": T + 5}])
    job = queued("1")
    assert (job.payloads, job.retry_count, job.perform_in) == ([("v1", 1.0)], -1, T + 5)


def test_failed_job_coming_back_into_a_queued_job_takes_the_failed_schedule(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "v1", "score": 1}, {"id": 1, "payload": "v2", "score": 5}])
    take("1")
    # While it runs, new versions arrive: one equal payload with a lower score.
    OrdersWorker.perform_async([{"id": 1, "payload": "v2", "score": 2, "perform_in": T + 100},
                                {"id": 1, "payload": "v3", "score": 3, "perform_in": T + 100}])
    fail("1", clock.now + 15, b"db down")
    job = queued("1")
    assert job.payloads == [("v1", 1.0), ("v2", 2.0), ("v3", 3.0)]
    assert job.retry_count == 0
    assert job.perform_in == clock.now + 15
    assert job.error == "db down"


def test_failed_job_without_queued_job(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "v1", "score": 1}])
    take("1")
    fail("1", clock.now + 15)
    job = queued("1")
    assert (job.payloads, job.retry_count, job.perform_in, job.error) == ([("v1", 1.0)], 0, clock.now + 15, "boom")


def test_requeued_morgue_job_into_a_queued_job_gets_now_and_minus_one(clock):
    OrdersWorker.perform_async([{"id": 1, "payload": "old", "score": 1}, {"id": 1, "payload": "same", "score": 9}])
    take("1")
    fail("1", clock.now + 15)
    assert actions().kill_failed() == 1
    OrdersWorker.perform_async([{"id": 1, "payload": "same", "score": 3, "perform_in": T + 500}])
    clock.advance(60)
    assert actions().morgue_requeue(["1"]) == 1
    job = queued("1")
    assert job.payloads == [("old", 1.0), ("same", 3.0)]
    assert (job.retry_count, job.perform_in, job.error) == (-1, clock.now, None)


def test_requeued_morgue_job_without_queued_job(clock):
    make_failed_job("1", [("v1", 1)], clock, clock.now + 15)
    actions().kill_failed()
    clock.advance(30)
    actions().morgue_requeue(["1"])
    job = queued("1")
    assert (job.payloads, job.retry_count, job.perform_in) == ([("v1", 1.0)], -1, clock.now)


ARRIVALS = [("a", 5), ("a", 2), ("b", 4), ("a", 9), ("b", 1)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(ARRIVALS))))[::7])
def test_equal_payload_keeps_the_lower_score_in_every_order_of_arrival(order, r):
    r.flushall()
    for i in order:
        payload, score = ARRIVALS[i]
        OrdersWorker.perform_async([{"id": 1, "payload": payload, "score": score}])
    assert queued("1").payloads == [("b", 1.0), ("a", 2.0)]


def test_lower_score_wins_through_every_path(clock):
    # queue <- failed, morgue <- kill, queue <- requeue: every merge keeps the minimum.
    OrdersWorker.perform_async([{"id": 1, "payload": "x", "score": 10}])
    take("1")
    OrdersWorker.perform_async([{"id": 1, "payload": "x", "score": 4}])
    fail("1", clock.now)
    assert queued("1").payloads == [("x", 4.0)]
    actions().kill_failed()
    OrdersWorker.perform_async([{"id": 1, "payload": "x", "score": 7}])
    take("1")
    fail("1", clock.now)
    actions().kill_failed()
    from queue_support import queries

    assert queries().morgue_job("1").payloads == [("x", 4.0)]
    OrdersWorker.perform_async([{"id": 1, "payload": "x", "score": 2}])
    actions().morgue_requeue(["1"])
    assert queued("1").payloads == [("x", 2.0)]


def test_payloads_with_equal_scores_are_all_kept():
    OrdersWorker.perform_async([{"id": 1, "payload": p, "score": 1} for p in ("c", "a", "b")])
    assert sorted(p for p, _ in queued("1").payloads) == ["a", "b", "c"]
    assert len(queue().ack_and_take(None, (held_lease(queue(), queue().shard_of("1")), 1)).jobs[0].payloads) == 3


@pytest.mark.parametrize("seed", range(5))
def test_random_bursts_match_a_model_of_the_merge_rule(seed, r):
    import random

    r.flushall()
    rng = random.Random(seed)
    model: dict[str, dict[str, float]] = {}
    for _ in range(40):
        batch = []
        for _ in range(rng.randint(1, 12)):
            job_id, payload, score = str(rng.randint(0, 4)), f"v{rng.randint(0, 15)}", rng.choice([rng.randint(0, 50),
                                                                                                   rng.random() * 50])
            batch.append({"id": job_id, "payload": payload, "score": score})
            known = model.setdefault(job_id, {})
            known[payload] = min(score, known.get(payload, score))
        OrdersWorker.perform_async(batch)
    for job_id, payloads in model.items():
        expected = sorted(((p, float(s)) for p, s in payloads.items()), key=lambda ps: (ps[1], ps[0]))
        assert queued(job_id).payloads == expected


def stored(r, job_id: str) -> bytes:
    shard = OrdersWorker.keys().shard(queue().shard_of(job_id))
    return r.hget(shard.payloads_hash, job_id)


def test_rising_versions_are_appended_to_the_encoded_list_in_order(r):
    for v in range(1, 61):
        OrdersWorker.perform_async([{"id": "hot", "payload": f"v{v}", "score": v}])
    blob = stored(r, "hot")
    # appendable: an array32 header and the last score as a float64; the earlier scores stay compact
    assert blob[0] == 0xDD and int.from_bytes(blob[1:5], "big") == 120 and blob[-9] == 0xCB
    flat = [x for v in range(1, 61) for x in (json.dumps(f"v{v}"), v)]
    # array32 (2 bytes more than array16), and the last score a float64 (9 bytes) instead of compact
    assert len(blob) == len(msgpack.packb(flat, use_bin_type=False)) + 2 + 9 - len(msgpack.packb(60))
    assert queued("hot").payloads == [(f"v{v}", float(v)) for v in range(1, 61)]


def test_an_id_past_64_payloads_spills_them_and_keeps_every_merge_rule(r):
    """Past 64 payloads an id's field holds 0xc1 and its count, its payloads the shard's spilled keys:
    one more version costs the same whatever the id holds (SPEC, Enqueue)."""
    for v in range(1, 301):
        OrdersWorker.perform_async([{"id": "hot", "payload": f"v{v}", "score": v}])
    assert stored(r, "hot") == b"\xc1300"
    shard = OrdersWorker.keys().shard(queue().shard_of("hot"))
    assert r.zcard(shard.spilled_payloads_zset) == 300 and r.hlen(shard.spilled_scores_hash) == 300
    # an equal payload keeps the lower score; an older version sorts before; a burst merges in order
    OrdersWorker.perform_async([{"id": "hot", "payload": "v5", "score": 0.5}, {"id": "hot", "payload": "v0", "score": 0},
                                {"id": "hot", "payload": "v7", "score": 900}])
    expected = sorted([(f"v{v}", float(v)) for v in range(1, 301) if v != 5] + [("v5", 0.5), ("v0", 0.0)],
                      key=lambda ps: (ps[1], ps[0]))
    assert queued("hot").payloads == expected
    assert stored(r, "hot") == b"\xc1301"
    # taken whole, in order, and nothing of it is left behind
    [job] = take("hot")
    assert job.payloads == expected
    assert r.exists(shard.spilled_payloads_zset, shard.spilled_scores_hash) == 0


@pytest.mark.parametrize("payloads", [
    ["v1", "v10", "v1", "v2"],  # bytes of one payload inside another: the general merge decides
    ["é" * 3, "ˋ" * 40, "x" * 300, "y" * 70_000],  # noqa: RUF001 - multi-byte text (0xcb bytes), str8, str16, str32
    ["a", "a", "b", "a"],  # the same payload again with a higher score keeps its first score
])
def test_appending_keeps_the_merge_rule_whatever_the_bytes(payloads):
    for n, p in enumerate(payloads, start=1):
        OrdersWorker.perform_async([{"id": "x", "payload": p, "score": n + 0.5}])
    first: dict[str, float] = {}
    for n, p in enumerate(payloads, start=1):
        first.setdefault(p, n + 0.5)
    assert queued("x").payloads == sorted(first.items(), key=lambda ps: (ps[1], ps[0]))


def test_an_older_version_after_appends_falls_back_to_the_full_merge_and_appending_resumes(r):
    OrdersWorker.perform_async([{"id": "x", "payload": f"v{v}", "score": v} for v in (1, 2)])
    OrdersWorker.perform_async([{"id": "x", "payload": "v4", "score": 4}])
    OrdersWorker.perform_async([{"id": "x", "payload": "v3", "score": 3}, {"id": "x", "payload": "v0", "score": 0}])
    OrdersWorker.perform_async([{"id": "x", "payload": "v5", "score": 5}, {"id": "x", "payload": "v6", "score": 6}])
    assert [p for p, _ in queued("x").payloads] == ["v0", "v1", "v2", "v3", "v4", "v5", "v6"]
    assert stored(r, "x")[0] == 0xDD
    # a list another script wrote (a failed job coming back) is merged the long way, then appendable again
    take("x")
    fail("x", T)
    OrdersWorker.perform_async([{"id": "x", "payload": "v7", "score": 7}])
    OrdersWorker.perform_async([{"id": "x", "payload": "v8", "score": 8}])
    assert [p for p, _ in queued("x").payloads] == [f"v{v}" for v in range(9)]


@pytest.mark.parametrize("seed", range(4))
def test_random_rising_versions_with_repeats_match_a_model_of_the_merge_rule(seed, r):
    import random

    r.flushall()
    rng = random.Random(seed)
    model: dict[str, dict[str, float]] = {}
    score = 0.0
    for _ in range(200):
        batch = []
        for _ in range(rng.randint(1, 3)):
            score += rng.choice([1, 1, 1, 0.25, 0])
            job_id = str(rng.randint(0, 2))
            payload = rng.choice([f"v{int(score)}", f"v{rng.randint(0, int(score))}", "v1"])
            s = score if rng.random() > 0.1 else rng.random() * score  # now and then an old version
            batch.append({"id": job_id, "payload": payload, "score": s})
            known = model.setdefault(job_id, {})
            known[payload] = min(s, known.get(payload, s))
        OrdersWorker.perform_async(batch)
    for job_id, payloads in model.items():
        expected = sorted(((p, float(s)) for p, s in payloads.items()), key=lambda ps: (ps[1], ps[0]))
        assert queued(job_id).payloads == expected
