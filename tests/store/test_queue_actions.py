"""Operators' actions: each one atomic per shard, each answering how many jobs it touched."""

import pytest
from queue_support import OrdersWorker, actions, fail, queries, queued, snapshot, take


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def kill(job_id, clock, payload="p"):
    OrdersWorker.perform_async([{"id": job_id, "payload": payload}])
    for _ in range(OrdersWorker.max_retry_count + 1):
        take(job_id)
        fail(job_id, clock.now, f"dead {job_id}".encode())


def failed_once(job_id, clock):
    OrdersWorker.perform_async([{"id": job_id}])
    take(job_id)
    fail(job_id, clock.now + 60)


def test_morgue_requeue_selected(clock):
    for i in range(4):
        kill(str(i), clock)
    assert actions().morgue_requeue(["0", "2", "missing"]) == 2
    assert sorted(j.id for j in queries().morgue("id").rows) == ["1", "3"]
    assert [j.id for j in queries().enqueued("id").rows] == ["0", "2"]


def test_morgue_requeue_all_and_delete_all(clock):
    for i in range(5):
        kill(str(i), clock)
    assert actions().morgue_requeue_all() == 5
    assert queries().morgue().rows == []
    assert len(queries().enqueued().rows) == 5
    for i in range(5, 8):
        kill(str(i), clock)
    assert actions().morgue_delete_all() == 3
    assert queries().morgue().rows == []


def test_morgue_delete_selected_leaves_no_trace(r, clock):
    kill("a", clock)
    kill("b", clock)
    assert actions().morgue_delete(["a", "a", "zzz"]) == 1
    assert queries().morgue_job("a") is None
    assert queries().morgue_job("b").error == "dead b"
    assert not any(b"morgue" in k and r.type(k) == b"hash" and r.hexists(k, "a") for k in r.keys("*"))


def test_delete_queued_jobs(clock):
    OrdersWorker.perform_async([{"id": i} for i in range(6)])
    assert actions().delete(["1", "3", "nope"]) == 2
    assert [j.id for j in queries().enqueued("id").rows] == ["0", "2", "4", "5"]
    assert actions().delete_all() == 4
    assert queries().enqueued().rows == []


def test_perform_all_now_reschedules_only_future_jobs(clock):
    failed_once("3", clock)
    OrdersWorker.perform_async([{"id": 1, "perform_in": clock.now + 3600}, {"id": 2, "perform_in": clock.now - 10}])
    assert actions().perform_all_now() == 2
    assert queued("1").perform_in == clock.now
    assert queued("2").perform_in == clock.now - 10
    assert queued("3").perform_in == clock.now
    assert queued("3").retry_count == 0


def test_kill_failed_moves_every_retry_to_the_morgue_with_all_payloads(clock):
    OrdersWorker.perform_async([{"id": "f", "payload": "a", "score": 1}, {"id": "f", "payload": "b", "score": 2}])
    take("f")
    fail("f", clock.now + 60, b"why")
    OrdersWorker.perform_async([{"id": "fresh"}])
    clock.advance(3)
    assert actions().kill_failed() == 1
    dead = queries().morgue_job("f")
    assert (dead.payloads, dead.error, dead.updated_at) == ([("a", 1.0), ("b", 2.0)], "why", clock.now)
    assert queued("f") is None
    assert queued("fresh") is not None


def test_delete_failed_deletes_only_retries(clock):
    failed_once("x", clock)
    failed_once("y", clock)
    OrdersWorker.perform_async([{"id": "fresh"}])
    assert actions().delete_failed() == 2
    assert [j.id for j in queries().enqueued("id").rows] == ["fresh"]


def test_actions_on_empty_queues_touch_nothing(r):
    before = snapshot(r)
    a = actions()
    counts = [a.morgue_requeue_all(), a.morgue_delete_all(), a.delete_all(), a.perform_all_now(), a.kill_failed(),
              a.delete_failed(), a.morgue_requeue([]), a.delete([])]
    assert counts == [0] * 8
    assert snapshot(r) == before


def test_actions_never_touch_jobs_in_processing(clock):
    failed_once("busy", clock)
    clock.advance(120)
    take("busy")
    assert actions().kill_failed() == 0
    assert actions().delete(["busy"]) == 0
    assert [j.id for j in queries().busy()] == ["busy"]
