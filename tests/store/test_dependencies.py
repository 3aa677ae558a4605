"""Dependencies across ids (``after``, docs/dependencies.md) through the real scripts: refusals, watches, waiting
versions, releases delivered into the dependent's shard (the keeper duty's step, called here), idempotently."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest
from queue_support import acquire, held_lease

import lowkiq
from lowkiq.store import dependencies, lua
from lowkiq.store.codec import shard_of
from lowkiq.store.keys import ShardKeys
from lowkiq.store.leases import Lease
from lowkiq.store.tags import Tags
from lowkiq.testing import drain


class Customers(lowkiq.Worker):
    shards_count = 4
    max_retry_count = 1
    performed: ClassVar[list[str]] = []

    def retry_in(self, retry_count: int) -> float:
        return 0

    def perform(self, payloads_by_id: Any) -> None:
        for job_id, payloads in payloads_by_id.items():
            if "boom" in payloads:
                raise ValueError(f"boom in {job_id}")
            Customers.performed.append(job_id)


class Orders(lowkiq.Worker):
    shards_count = 3
    performed: ClassVar[list[tuple[str, list[Any]]]] = []

    def perform(self, payloads_by_id: Any) -> None:
        for job_id, payloads in payloads_by_id.items():
            Orders.performed.append((job_id, list(payloads)))


class Stranger(lowkiq.Worker):
    def perform(self, payloads_by_id: Any) -> None:
        pass


@pytest.fixture
def app(r, redis_url):
    Customers.performed, Orders.performed = [], []
    runtime = lowkiq.configure(redis_url=redis_url, workers=[Customers, Orders])
    yield runtime
    lowkiq.runtime._current = None


def all_shards() -> list[ShardKeys]:
    return [*Customers.keys().shards(), *Orders.keys().shards()]


def deliver() -> int:
    """What the keeper duty does on every beat, for every shard (here: all of them)."""
    client = lowkiq.current().client
    return dependencies.deliver(client, dependencies.pending_releases(client, all_shards()))


def waiting(job_id: str) -> list[dependencies.Waiting]:
    keys = Orders.keys().shard(shard_of(job_id, Orders.shards_count))
    return dependencies.waiting_of(lowkiq.current().client, keys, job_id)


def ran(worker: type[lowkiq.Worker]) -> list[str]:
    return drain(worker).get(worker.__name__, [])


def perform_by_hand(worker: type[lowkiq.Worker], job_id: str) -> None:
    """Take and acknowledge ``job_id`` as a server thread does, with no delivery after it (a drain delivers)."""
    q = lowkiq.current().queue(worker)
    lease = held_lease(q, q.shard_of(job_id))
    assert [job.id for job in q.ack_and_take(None, (lease, 100)).jobs] == [job_id]
    q.ack_and_take((lease, [job_id]), None)


def after(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"worker": worker, "id": job_id} for worker, job_id in pairs]


@pytest.mark.parametrize(("bad", "message"), [
    ("Customers", "after must be a list"),
    ([{"worker": "Customers"}], r"after\[0\] must have exactly the keys"),
    ([{"worker": "Customers", "id": "c1", "extra": 1}], r"after\[0\] must have exactly the keys"),
    ([{"worker": "Customers", "id": None}], r"after\[0\]: id must be a str or an int"),
    ([{"worker": "", "id": "c1"}], r"after\[0\]: worker must be"),
    (["Customers"], r"after\[0\] must be a dict"),
    ([{"worker": "Stranger", "id": "c1"}], r"after\[0\] names worker 'Stranger', which is not configured"),
    ([{"worker": "Customers", "id": "c1"}, {"worker": "Orders", "id": "o1"}],
     r"after\[1\] names the job's own id 'o1'"),
    ([{"worker": "Customers", "id": str(n)} for n in range(17)], "at most 16"),
])
def test_a_bad_after_is_refused_and_nothing_is_written(app, r, bad, message):
    Customers.perform_async([{"id": "c1"}])
    before = sorted(r.keys("*"))
    with pytest.raises((TypeError, ValueError), match=message) as refused:
        Orders.perform_async([{"id": "o0"}, {"id": "o1", "after": bad}])
    assert str(refused.value).startswith("job 1: after")
    assert sorted(r.keys("*")) == before


def test_an_id_with_nothing_queued_does_not_hold_its_dependent(app):
    Orders.perform_async([{"id": "o1", "payload": "v1", "after": after(("Customers", "c9"))}])
    assert waiting("o1") == []
    assert ran(Orders) == ["o1"]


def test_a_dependent_waits_until_its_dependency_is_performed(app):
    Customers.perform_async([{"id": "c1", "payload": "create"}])
    Orders.perform_async([{"id": "o1", "payload": "v1", "after": after(("Customers", "c1"))}])
    [version] = waiting("o1")
    assert version.on == [("Customers", "c1")]
    assert ran(Orders) == []
    assert deliver() == 0  # nothing settled yet
    perform_by_hand(Customers, "c1")  # settled, not delivered yet
    assert len(dependencies.pending_releases(lowkiq.current().client, all_shards())) == 1
    assert ran(Orders) == []
    assert deliver() == 1
    assert waiting("o1") == []
    assert ran(Orders) == ["o1"]
    assert Orders.performed == [("o1", ["v1"])]
    assert deliver() == 0


def test_a_waiting_version_keeps_its_tags_until_it_is_released_and_queued(app):
    console = lowkiq.current()
    Customers.perform_async([{"id": "c1"}])
    Orders.perform_async([{"id": "o1", "payload": "v1", "tags": ["vip"], "after": after(("Customers", "c1"))},
                          {"id": "o2", "payload": "v1", "tags": ["now"], "after": after(("Customers", "c9"))}])
    tags = lambda job_id: Tags(console.client, Orders.keys()).of(job_id)  # noqa: E731
    assert tags("o2") == ("now",)  # nothing to wait for: queued at once, with its tags
    assert tags("o1") == ()  # waiting: not queued yet
    perform_by_hand(Customers, "c1")
    assert deliver() == 1
    assert tags("o1") == ("vip",)
    assert sorted(ran(Orders)) == ["o1", "o2"]
    assert tags("o1") == ()  # performed: gone with its last copy


def test_a_job_of_the_same_call_can_be_the_dependency(app):
    Orders.perform_async([{"id": "o1", "payload": "first"},
                          {"id": "o2", "payload": "second", "after": after(("Orders", "o1"))},
                          {"id": "o3", "payload": "third", "after": after(("Orders", "o2"))}])
    # a drain delivers the releases of what it performed, as a server does
    assert ran(Orders) == ["o1", "o2", "o3"]
    assert [payloads for _, payloads in Orders.performed] == [["first"], ["second"], ["third"]]


def test_a_dependency_in_the_morgue_holds_until_an_operator_deletes_it(app):
    Customers.perform_async([{"id": "c1", "payload": "boom"}])
    Orders.perform_async([{"id": "o1", "after": after(("Customers", "c1"))}])
    drain(Customers, raise_errors=False)
    drain(Customers, raise_errors=False)
    assert lowkiq.current().queries(Customers).morgue_count() == 1
    assert deliver() == 0
    assert len(waiting("o1")) == 1
    lowkiq.current().actions(Customers).morgue_delete(["c1"])
    assert deliver() == 1
    assert ran(Orders) == ["o1"]


def test_a_dependency_requeued_from_the_morgue_releases_once_performed(app):
    Customers.perform_async([{"id": "c1", "payload": "boom"}])
    Orders.perform_async([{"id": "o1", "after": after(("Customers", "c1"))}])
    drain(Customers, raise_errors=False)
    drain(Customers, raise_errors=False)
    Customers.perform_async([{"id": "c1", "payload": "fixed"}])  # a new version, performed alone
    drain(Customers)
    assert deliver() == 0  # its dead version still holds
    lowkiq.current().actions(Customers).morgue_requeue(["c1"])
    # the requeued dead version fails again: back to the morgue, still holding
    drain(Customers, raise_errors=False)
    drain(Customers, raise_errors=False)
    assert deliver() == 0
    lowkiq.current().actions(Customers).morgue_delete(["c1"])
    assert deliver() == 1


def test_deleting_a_queued_dependency_releases(app):
    Customers.perform_async([{"id": "c1"}])
    Orders.perform_async([{"id": "o1", "after": after(("Customers", "c1"))}])
    lowkiq.current().actions(Customers).delete(["c1"])
    assert deliver() == 1
    assert ran(Orders) == ["o1"]


def test_a_delivery_repeated_after_a_crash_changes_nothing(app):
    Customers.perform_async([{"id": "c1"}])
    Orders.perform_async([{"id": "o1", "payload": "v1", "after": after(("Customers", "c1"))}])
    perform_by_hand(Customers, "c1")
    client = lowkiq.current().client
    releases = dependencies.pending_releases(client, all_shards())
    assert len(releases) == 1
    # delivered, then the process died before removing it from the stream: the next holder delivers it again
    [reply] = lua.run_many(client, [("depend_deliver", releases[0].target, (
        releases[0].id, releases[0].wait, releases[0].worker, releases[0].dependency, "ch", "m"))])
    assert reply == b"queued"
    assert deliver() == 1
    assert ran(Orders) == ["o1"]
    assert Orders.performed == [("o1", ["v1"])]


def test_a_release_before_the_park_step_is_kept_for_it(app):
    Customers.perform_async([{"id": "c1"}])
    client = lowkiq.current().client
    keys = Orders.keys().shard(shard_of("o1", Orders.shards_count))
    [watched] = lua.run_many(client, [("depend_watch", Customers.keys().shard(shard_of("c1", 4)),
                                       ("c1", "Customers", keys.queue_name, keys.shard, "o1", "w1"))])
    assert watched == 1
    perform_by_hand(Customers, "c1")
    assert deliver() == 1  # delivered before the producer's second step
    [parked] = lua.run_many(client, [("depend_park", keys, ("o1", "w1", "", b'"v1"', "", "", "ch", "m", "",
                                                           "", "Customers", "c1"))])
    assert parked == 0  # queued at once
    assert ran(Orders) == ["o1"]


def test_versions_in_processing_and_queued_both_hold(app):

    Customers.perform_async([{"id": "c1", "payload": "v1"}])
    q = lowkiq.current().queue(Customers)
    lease = acquire(q, shard_of("c1", 4), "tests")
    assert isinstance(lease, Lease)
    taken = q.ack_and_take(None, (lease, 1))
    assert [job.id for job in taken.jobs] == ["c1"]
    Customers.perform_async([{"id": "c1", "payload": "v2"}])  # queued beside the copy in processing
    Orders.perform_async([{"id": "o1", "after": after(("Customers", "c1"))}])
    q.ack_and_take((lease, ["c1"]), None)  # the first copy performed
    assert deliver() == 0
    taken = q.ack_and_take(None, (lease, 1))
    q.ack_and_take((lease, ["c1"]), None)
    assert deliver() == 1


def audit(now: float) -> list[dependencies.Release]:
    """What the audit duty finds in every shard of Orders, a whole round."""
    client = lowkiq.current().client
    found = []
    for keys in Orders.keys().shards():
        cursor = 0
        while True:
            releases, cursor = dependencies.orphaned(client, keys, {"Customers": Customers, "Orders": Orders}, now,
                                                     cursor)
            found += releases
            if cursor == 0:
                break
    return found


def test_an_audit_releases_a_version_whose_watch_was_lost(app, r):
    Customers.perform_async([{"id": "c1"}, {"id": "c2"}])
    Orders.perform_async([{"id": "o1", "after": after(("Customers", "c1"))},
                          {"id": "o2", "after": after(("Customers", "c2"))}])
    # a failover lost the last writes of c1's primary: its watch, not the parked version
    r.hdel(Customers.keys().shard(shard_of("c1", 4)).depend_watches_hash, "c1")
    client = lowkiq.current().client
    since = max(version.since for job_id in ("o1", "o2") for version in waiting(job_id))
    assert audit(since + 1) == []  # too young to be checked
    [release] = audit(since + dependencies.AUDIT_AFTER + 1)
    assert (release.id, release.worker, release.dependency) == ("o1", "Customers", "c1")
    assert dependencies.deliver(client, [release]) == 1
    assert ran(Orders) == ["o1"]
    assert len(waiting("o2")) == 1  # its watch is there: it waits for c2


def test_an_audit_releases_a_version_whose_delivery_was_lost(app, r):
    Customers.perform_async([{"id": "c1"}])
    Orders.perform_async([{"id": "o1", "payload": "v1", "after": after(("Customers", "c1"))}])
    perform_by_hand(Customers, "c1")
    # on a Cluster: delivered into o1's node, removed from c1's stream, then o1's primary failed over and lost
    # the delivery
    stream = Customers.keys().shard(shard_of("c1", 4)).depend_releases_stream
    r.delete(stream)
    assert deliver() == 0
    [version] = waiting("o1")
    [release] = audit(version.since + dependencies.AUDIT_AFTER + 1)
    assert dependencies.deliver(lowkiq.current().client, [release]) == 1
    assert ran(Orders) == ["o1"]
    assert Orders.performed == [("o1", ["v1"])]


class Batches(lowkiq.Worker):
    """Performs two ids a batch, and fails the one whose payload says so (the other is acknowledged)."""

    batch_size = 2
    shards_count = 1
    max_retry_count = 5

    def retry_in(self, retry_count: int) -> float:
        return 3600

    def perform(self, payloads_by_id: Any) -> None:
        failed = {job_id: ValueError("no") for job_id, payloads in payloads_by_id.items() if "fail" in payloads}
        if failed:
            raise lowkiq.PartialFailure(failed)


def test_an_id_a_partial_failure_spared_releases_and_the_failed_one_holds(r, redis_url):
    lowkiq.configure(redis_url=redis_url, workers=[Batches, Orders])
    try:
        Batches.perform_async([{"id": "ok", "payload": "fine"}, {"id": "bad", "payload": "fail"}])
        Orders.perform_async([{"id": "o-ok", "after": after(("Batches", "ok"))},
                              {"id": "o-bad", "after": after(("Batches", "bad"))}])
        drained = drain(Batches, raise_errors=False)
        assert drained["Batches"] == ["ok"]  # its release delivered by the drain
        assert ran(Orders) == ["o-ok"]
        assert len(waiting("o-bad")) == 1
    finally:
        lowkiq.runtime._current = None


def test_a_released_version_keeps_its_group_and_perform_in(app, r):
    Customers.perform_async([{"id": "c1"}])
    later = time.time() + 3600
    Orders.perform_async([{"id": "o1", "group": "acme", "perform_in": later, "after": after(("Customers", "c1"))}])
    keys = Orders.keys().shard(shard_of("o1", Orders.shards_count))
    assert r.hget(keys.group_of_hash, "o1") is None  # waiting: not queued yet
    perform_by_hand(Customers, "c1")
    assert deliver() == 1
    assert r.hget(keys.group_of_hash, "o1") == b"acme"
    assert r.zscore(keys.ids_by_perform_in_zset, "o1") == pytest.approx(later)
    assert r.zscore(keys.group_lengths_zset, "acme") == 1
