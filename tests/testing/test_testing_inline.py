"""lowkiq.testing.inline(): perform_async performs the call's jobs in the caller, with no Redis at all."""

from __future__ import annotations

import random
import threading
from typing import Any, ClassVar

import pytest
from queue_support import queued

import lowkiq
from lowkiq import runtime
from lowkiq.testing import inline

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens there: any use of Redis raises


class Recorder(lowkiq.Worker):
    shards_count = 3
    batch_size = 10  # inline performs one id per call all the same
    performed: ClassVar[list[dict[str, list[Any]]]] = []

    def perform(self, payloads_by_id):
        Recorder.performed.append(dict(payloads_by_id))
        if any(p == "boom" for payloads in payloads_by_id.values() for p in payloads):
            raise ValueError("boom")


@pytest.fixture(autouse=True)
def fresh():
    Recorder.performed = []
    before = runtime._current
    yield
    runtime.inline_enqueue = None
    if runtime._current is not None and runtime._current is not before:
        runtime._current.close()
    runtime._current = None


@pytest.fixture
def unreachable():
    return lowkiq.configure(workers=[Recorder], redis_url=UNREACHABLE, pool_timeout=0.5)


def test_jobs_are_performed_at_once_with_no_reachable_redis(unreachable):
    with inline():
        count = Recorder.perform_async([{"id": 1, "payload": {"v": 1}}, {"id": "b", "payload": [1, (2, 3)]}])
    assert count == 2
    # one perform per id, the payloads as a server loads them back (JSON: a tuple is a list)
    assert Recorder.performed == [{"1": [{"v": 1}]}, {"b": [[1, [2, 3]]]}]
    # outside the block the same call needs Redis, which is not there
    with pytest.raises(Exception, match="(?i)connect"):
        Recorder.perform_async([{"id": 1}])


def test_jobs_are_performed_when_lowkiq_is_not_configured():
    assert runtime._current is None
    with inline():
        assert Recorder.perform_async([{"id": 7}]) == 1
    assert Recorder.performed == [{"7": [""]}]
    with pytest.raises(lowkiq.NotConfigured):
        Recorder.perform_async([{"id": 7}])


def test_jobs_of_one_id_merge_by_the_merge_rules(unreachable):
    with inline():
        count = Recorder.perform_async([
            {"id": 1, "payload": "v3", "score": 30},
            {"id": 2, "payload": "only"},
            {"id": 1, "payload": "v1", "score": 10},
            {"id": 1, "payload": "v2", "score": 20},
            {"id": 1, "payload": "v3", "score": 5},  # an equal payload keeps the lower score: first now
            {"id": 1, "payload": {"b": 1, "a": 2}, "score": 40},
            {"id": 1, "payload": {"a": 2, "b": 1}, "score": 50},  # equal once canonical JSON: merged
        ])
    assert count == 2
    assert Recorder.performed == [{"1": ["v3", "v1", "v2", {"a": 2, "b": 1}]}, {"2": ["only"]}]


def test_jobs_without_a_score_keep_the_order_of_the_call(unreachable):
    with inline():
        Recorder.perform_async([{"id": "x", "payload": f"v{n}"} for n in (3, 1, 2)])
    assert Recorder.performed == [{"x": ["v3", "v1", "v2"]}]


@pytest.mark.parametrize("seed", range(6))
def test_the_merge_is_the_push_scripts_on_a_real_redis(configure, r, seed):
    """The same call, performed inline and pushed into an empty queue of a real Redis: each id's payloads,
    in their order, are what the queue holds."""
    configure(workers=[Recorder])
    rng = random.Random(seed)
    call = []
    for _ in range(rng.randint(1, 30)):
        job: dict[str, Any] = {"id": rng.choice(["a", "b", "c", 1]), "payload": rng.choice(["v1", "v2", "v3", {"k": 1},
                                                                                           {"k": 2}, [1, 2], 0, ""])}
        if rng.random() < 0.7:
            job["score"] = rng.choice([1, 2, 3, 2.5, rng.random() * 4])
        call.append(job)
    with inline():
        inline_count = Recorder.perform_async(call)
    assert r.dbsize() == 0  # inline wrote nothing
    assert Recorder.perform_async(call) == inline_count
    performed = {job_id: payloads for batch in Recorder.performed for job_id, payloads in batch.items()}
    assert len(performed) == inline_count
    for job_id, payloads in performed.items():
        assert payloads == [payload for payload, _ in queued(job_id, Recorder).payloads], job_id


@pytest.mark.parametrize("bad", [
    [{"id": 1}, {"id": None}],
    [{"id": 1}, {"id": ""}],
    [{"id": 1}, {"id": 2, "payload": object()}],
    [{"id": 1}, {"id": 2, "score": float("nan")}],
    [{"id": 1}, {"id": 2, "colour": "red"}],
    {"id": 1},
])
def test_a_bad_job_raises_as_perform_async_does_and_nothing_is_performed(unreachable, bad):
    # Outside the block, perform_async validates before it reaches (the unreachable) Redis.
    with pytest.raises((TypeError, ValueError)) as outside:
        Recorder.perform_async(bad)
    with inline(), pytest.raises(type(outside.value)) as inside:
        Recorder.perform_async(bad)
    assert str(inside.value) == str(outside.value)
    assert Recorder.performed == []


def test_an_exception_of_perform_propagates_and_later_ids_are_not_performed(unreachable):
    with inline(), pytest.raises(ValueError, match="boom"):
        Recorder.perform_async([{"id": 1}, {"id": 2, "payload": "boom"}, {"id": 3}])
    assert Recorder.performed == [{"1": [""]}, {"2": ["boom"]}]


def test_middlewares_wrap_the_call_and_each_perform_as_a_client_and_a_server_apply_them():
    seen: ClassVar[list[Any]] = []

    def client(worker, batch, call_next):
        seen.append(("client", worker, list(batch)))
        batch.append({"id": "added"})  # a client middleware may change the call's jobs
        return call_next()

    def server(worker, batch, call_next):
        seen.append(("server", type(worker), dict(batch)))
        result = call_next()
        seen.append(("server done", list(batch)))
        return result

    lowkiq.configure(workers=[Recorder], redis_url=UNREACHABLE, client_middlewares=[client], server_middlewares=[server])
    with inline():
        assert Recorder.perform_async([{"id": 1}]) == 2
    assert seen == [("client", Recorder, [{"id": 1}]), ("server", Recorder, {"1": [""]}), ("server done", ["1"]),
                    ("server", Recorder, {"added": [""]}), ("server done", ["added"])]


def test_a_client_middleware_that_stops_the_call_performs_nothing():
    lowkiq.configure(workers=[Recorder], redis_url=UNREACHABLE, client_middlewares=[lambda w, b, call_next: 0])
    with inline():
        assert Recorder.perform_async([{"id": 1}]) == 0
    assert Recorder.performed == []


class Chained(lowkiq.Worker):
    """Enqueues into Recorder from its perform; reads lowkiq.context() before and after."""

    contexts: ClassVar[list[tuple[str, int, tuple[int, int], bool]]] = []

    def perform(self, payloads_by_id):
        context = lowkiq.context()
        Chained.contexts.append((context.worker, context.shard, context.fencing_token, context.lease_lost))
        Recorder.perform_async([{"id": job_id, "payload": "chained"} for job_id in payloads_by_id])
        Chained.contexts.append((lowkiq.context().worker, lowkiq.context().shard, lowkiq.context().fencing_token,
                                 lowkiq.context().lease_lost))


def test_a_perform_that_enqueues_performs_those_jobs_at_once_and_keeps_its_context():
    Chained.contexts = []
    with inline():
        Chained.perform_async([{"id": "order-1"}, {"id": "order-2"}])
    assert Recorder.performed == [{"order-1": ["chained"]}, {"order-2": ["chained"]}]
    from lowkiq.store.codec import shard_of

    (w1, s1, t1, lost1), again1, (w2, s2, t2, _), again2 = Chained.contexts
    assert (w1, s1, lost1) == ("Chained", shard_of("order-1", Chained.shards_count), False)
    assert again1 == Chained.contexts[0] and again2 == Chained.contexts[2]
    assert s2 == shard_of("order-2", Chained.shards_count) and w2 == "Chained"
    assert t2 > t1  # a fencing token higher than every one before
    with pytest.raises(RuntimeError, match="only available inside"):
        lowkiq.context()


def test_blocks_nest_and_end_with_the_block_even_when_it_raises():
    with inline():
        with inline():
            Recorder.perform_async([{"id": 1}])
        Recorder.perform_async([{"id": 2}])
        with pytest.raises(KeyError), inline():
            raise KeyError("x")
        Recorder.perform_async([{"id": 3}])
    assert runtime.inline_enqueue is None
    assert [list(b) for b in Recorder.performed] == [["1"], ["2"], ["3"]]


def test_it_covers_perform_async_called_from_other_threads():
    with inline():
        thread = threading.Thread(target=Recorder.perform_async, args=([{"id": "t"}],))
        thread.start()
        thread.join()
    assert Recorder.performed == [{"t": [""]}]


class Capped(lowkiq.Worker):
    max_payloads_per_id = 2
    performed: ClassVar[list[Any]] = []

    def perform(self, payloads_by_id):
        Capped.performed.append(dict(payloads_by_id))


class Rejecting(Capped):
    payload_overflow = "reject"


def test_max_payloads_per_id_drops_the_oldest_or_rejects_the_call():
    Capped.performed = []
    with inline():
        Capped.perform_async([{"id": 1, "payload": p, "score": s} for p, s in (("c", 3), ("a", 1), ("b", 2))])
        assert Capped.performed == [{"1": ["b", "c"]}]
        with pytest.raises(ValueError, match=r"PAYLOAD_LIMIT id 1 would hold 3 payloads; the limit is 2"):
            Rejecting.perform_async([{"id": 2}, {"id": 1, "payload": "a"}, {"id": 1, "payload": "b"},
                                     {"id": 1, "payload": "c"}])
    assert Capped.performed == [{"1": ["b", "c"]}]  # nothing of the rejected call


def test_a_subclass_computing_ids_in_perform_async_goes_through_inline_too():
    class ByOrder(Recorder):
        @classmethod
        def perform_async(cls, jobs):
            return super().perform_async([{"id": job["payload"]["order"], **job} for job in jobs])

    with inline():
        ByOrder.perform_async([{"payload": {"order": 5}}])
    assert Recorder.performed == [{"5": [{"order": 5}]}]


def test_a_worker_without_perform_is_a_clear_error():
    class NoPerform(lowkiq.Worker):
        pass

    with inline(), pytest.raises(lowkiq.ConfigurationError, match="NoPerform has no perform method"):
        NoPerform.perform_async([{"id": 1}])


def test_a_payload_the_configured_loader_cannot_read_is_a_payload_decode_error():
    def refuse(data):
        raise ValueError("not today")

    lowkiq.configure(workers=[Recorder], redis_url=UNREACHABLE, load_payload=refuse)
    with inline(), pytest.raises(lowkiq.PayloadDecodeError, match="payload of id '1' cannot be loaded: ValueError"):
        Recorder.perform_async([{"id": 1}])
