"""Tags (docs/tags.md): validated on enqueue, the union of an id's versions, kept through retries, the morgue
and requeue, gone with the id's last copy; found through each shard's index at the cost of the tag's ids."""

from __future__ import annotations

import pytest
from queue_support import OrdersWorker, actions, held_lease, queue, take

import lowkiq
from lowkiq.console import BadInput, Console, histories


@pytest.fixture
def runtime(configure):
    return configure(workers=[OrdersWorker])


@pytest.fixture
def console(runtime):
    return Console.from_runtime(runtime, redis_timeout=30)


def view(console):
    return console.worker("OrdersWorker")


def tags_of(console, job_id):
    return console.tags_of(view(console), job_id)


def every_tagged(console, tag, limit=100):
    """Every page of a tag's lookup, in order."""
    ids, after = [], None
    while True:
        page = console.tagged(view(console), tag, limit=limit, after=after)
        ids += [job.id for job in page.jobs]
        if page.next is None:
            return ids
        after = page.next


def ack(job_id):
    q = queue()
    lease = held_lease(q, q.shard_of(job_id))
    q.ack_and_take((lease, [job_id]), None)


def tag_keys(r):
    return sorted(k for k in r.keys("*") if k.endswith((b":tags_of", b":tagged_ids_lex")))


def test_an_ids_tags_are_the_union_of_its_versions(runtime, console):
    OrdersWorker.perform_async([{"id": "a", "payload": 1, "tags": ["vip", "acct-7"]},
                                {"id": "a", "payload": 2, "tags": ["acct-7", "eu"]}])
    OrdersWorker.perform_async([{"id": "a", "payload": 3, "tags": ["late"]}, {"id": "b", "payload": 1}])
    assert tags_of(console, "a") == ("vip", "acct-7", "eu", "late")
    assert tags_of(console, "b") == ()
    for tag in ("vip", "acct-7", "eu", "late"):
        assert every_tagged(console, tag) == ["a"]
    page = console.tagged(view(console), "eu", limit=10)
    assert [job.as_json() for job in page.jobs] == [
        {"id": "a", "tags": ["vip", "acct-7", "eu", "late"], "queued": True, "busy": False, "dead": False}]


def test_a_paged_lookup_returns_each_tagged_id_exactly_once(runtime, console):
    OrdersWorker.perform_async([{"id": f"t{n}", "tags": ["acme"] if n % 3 else ["other"]} for n in range(300)])
    expected = sorted(f"t{n}" for n in range(300) if n % 3)
    for limit in (1, 7, 200, 1000):
        found = every_tagged(console, "acme", limit=limit)
        assert sorted(found) == expected and len(found) == len(set(found))
    assert every_tagged(console, "nobody") == []


def test_a_lookup_among_100_000_untagged_ids_costs_the_tags_ids(runtime, console, r):
    OrdersWorker.perform_async([{"id": f"plain-{n}"} for n in range(100_000)])

    def commands(tag):
        r.config_resetstat()
        assert sorted(every_tagged(console, tag)) == sorted(f"{tag}-{n}" for n in range(count[tag]))
        stats = r.info("commandstats")
        # what the lookup sent; not a new connection's handshake (HELLO, CLIENT SETINFO, PING) nor the count's own
        handshake = ("hello", "client", "ping", "config", "info")
        return sum(v["calls"] for name, v in stats.items()
                   if not name.removeprefix("cmdstat_").startswith(handshake))

    count = {"few": 10, "more": 40}
    OrdersWorker.perform_async([{"id": f"{tag}-{n}", "tags": [tag]} for tag, k in count.items() for n in range(k)])
    assert sum(r.zcard(shard.ids_by_perform_in_zset) for shard in queue().keys.shards()) == 100_050
    few, more = commands("few"), commands("more")
    # per shard an EVALSHA and a ZRANGEBYLEX, per id found four lookups: nothing grows with the 100,000
    shards = OrdersWorker.shards_count
    assert few == 2 * shards + 4 * 10
    assert more == 2 * shards + 4 * 40


@pytest.mark.parametrize("tags, error, text", [
    ("vip", TypeError, "tags must be a list of str"),
    ([""], ValueError, "tags must not hold an empty tag"),
    (["a\nb"], ValueError, "tags 'a\\\\nb' must be printable"),
    (["x" * 65], ValueError, "tags .x+.\\.\\.\\. is 65 characters long; at most 64"),
    ([f"t{n}" for n in range(17)], ValueError, "tags holds 17 tags; at most 16"),
    ([7], TypeError, "tags must hold only str"),
    (None, TypeError, "tags must be a list of str"),
])
def test_bad_tags_are_refused_and_nothing_is_enqueued(runtime, r, tags, error, text):
    before = sorted(r.keys("*"))
    with pytest.raises(error, match=f"job 1: {text}"):
        OrdersWorker.perform_async([{"id": "good", "tags": ["fine"]}, {"id": "bad", "tags": tags}])
    assert sorted(r.keys("*")) == before


def test_sixteen_tags_of_64_characters_are_taken_and_duplicates_count_once(runtime, console):
    tags = [f"{n:02}" + "x" * 62 for n in range(16)]
    OrdersWorker.perform_async([{"id": "a", "tags": tags}, {"id": "b", "tags": ["x", "y", "x"]}])
    assert tags_of(console, "a") == tuple(tags) and tags_of(console, "b") == ("x", "y")


def test_a_performed_id_leaves_the_index(runtime, console, r):
    OrdersWorker.perform_async([{"id": "a", "tags": ["vip"]}])
    assert [job.id for job in take("a")] == ["a"]
    assert [(j.id, j.queued, j.busy) for j in console.tagged(view(console), "vip", limit=10).jobs] == [("a", False, True)]
    ack("a")
    assert tags_of(console, "a") == () and every_tagged(console, "vip") == []
    assert tag_keys(r) == []  # nothing left behind


def test_a_version_queued_while_its_id_performs_keeps_the_tags(runtime, console, r):
    OrdersWorker.perform_async([{"id": "a", "tags": ["v1"]}])
    take("a")
    OrdersWorker.perform_async([{"id": "a", "payload": 2, "tags": ["v2"]}])
    ack("a")  # the queued copy stays: so do its tags
    assert tags_of(console, "a") == ("v1", "v2")
    take("a")
    ack("a")
    assert tags_of(console, "a") == () and tag_keys(r) == []


def test_tags_are_kept_through_retries_the_morgue_and_requeue(runtime, console, r, clock):
    OrdersWorker.perform_async([{"id": "a", "tags": ["vip"]}])
    q = queue()
    take("a")
    q.fail(held_lease(q, q.shard_of("a")), [("a", clock() - 1)], b"boom", OrdersWorker.max_retry_count)
    assert tags_of(console, "a") == ("vip",)  # retried: queued again
    take("a")
    q.fail(held_lease(q, q.shard_of("a")), [("a", clock() - 1)], b"boom", 0)  # straight to the morgue
    page = console.tagged(view(console), "vip", limit=10)
    assert [(j.id, j.queued, j.busy, j.dead) for j in page.jobs] == [("a", False, False, True)]
    assert actions().morgue_requeue(["a"]) == 1
    assert [(j.id, j.queued, j.dead) for j in console.tagged(view(console), "vip", limit=10).jobs] == [("a", True, False)]
    assert actions().kill(["a"]) == 1  # the operator's kill: to the morgue again
    assert tags_of(console, "a") == ("vip",)
    assert actions().morgue_delete(["a"]) == 1
    assert tags_of(console, "a") == () and tag_keys(r) == []


def test_a_deleted_id_loses_its_tags(runtime, console, r):
    OrdersWorker.perform_async([{"id": "a", "tags": ["vip"]}, {"id": "b", "tags": ["vip"]}])
    assert actions().delete(["a"]) == 1
    assert every_tagged(console, "vip") == ["b"]
    assert actions().delete_all() == 1
    assert tag_keys(r) == []


def test_the_push_entry_of_an_ids_history_names_its_tags(runtime, console):
    OrdersWorker.perform_async([{"id": "a", "tags": ["vip", "<b>x</b>"]}])
    OrdersWorker.perform_async([{"id": "a", "payload": 2}])
    shown = histories.of(console, view(console), "a")
    merged, enqueued = [event for event in shown.history.events if event.kind in ("enqueued", "merged")]
    assert enqueued.tags == ("vip", "<b>x</b>") and "tagged vip, <b>x</b>" in enqueued.summary
    assert merged.tags == () and "tagged" not in merged.summary
    assert enqueued.as_json()["tags"] == ["vip", "<b>x</b>"]


def test_a_lookup_refuses_a_tag_no_job_may_carry_and_a_bad_cursor(runtime, console):
    with pytest.raises(BadInput, match="must not hold an empty tag"):
        console.tagged(view(console), "", limit=10)
    with pytest.raises(BadInput, match="not a cursor"):
        console.tagged(view(console), "vip", limit=10, after="9:x")
    with pytest.raises(BadInput, match="limit must be in 1..1000"):
        console.tagged(view(console), "vip", limit=0)


def test_whole_id_morgue_policy_keeps_the_tags_of_versions_joining_a_dead_job(configure, r):
    class Held(lowkiq.Worker):
        shards_count = 1
        morgue_policy = "whole_id"

        def perform(self, payloads_by_id):
            pass

    rt = configure(workers=[Held])
    console = Console.from_runtime(rt, redis_timeout=30)
    Held.perform_async([{"id": "a", "tags": ["one"]}])
    q = rt.queue(Held)
    lease = held_lease(q, 0)
    q.ack_and_take(None, (lease, 10))
    q.fail(lease, [("a", rt.clock() + 60)], b"boom", 0, morgue_policy="whole_id")
    Held.perform_async([{"id": "a", "payload": 2, "tags": ["two"]}])  # joins its dead job
    v = console.worker("Held")
    assert console.tags_of(v, "a") == ("one", "two")
    assert [(j.id, j.queued, j.dead) for j in console.tagged(v, "two", limit=5).jobs] == [("a", False, True)]


@pytest.mark.slow
def test_tags_on_a_redis_cluster_stay_in_each_shards_slot(cluster, clock):
    from cluster_support import covering_worker

    worker = covering_worker(cluster, "tagged", 6, max_retry_count=0)
    rt = lowkiq.configure(redis_url=cluster.url, workers=[worker])
    rt.clock = clock
    try:
        assert rt.client.mode == "cluster"
        worker.perform_async([{"id": f"c{n}", "tags": ["vip"] if n % 2 else ["acct-7", "vip"]} for n in range(30)])
        c = Console.from_runtime(rt, redis_timeout=30)
        v = c.worker(worker.__name__)
        found, after = [], None
        while True:
            page = c.tagged(v, "vip", limit=4, after=after)
            found += [job.id for job in page.jobs]
            if page.next is None:
                break
            after = page.next
        assert sorted(found) == sorted(f"c{n}" for n in range(30))
        q = rt.queue(worker)
        for shard in range(worker.shards_count):  # every shard's ids performed: the index empties everywhere
            lease = held_lease(q, shard, runtime=rt)
            taken = q.ack_and_take(None, (lease, 100))
            q.ack_and_take((lease, [job.id for job in taken.jobs]), None)
        assert c.tagged(v, "vip", limit=100).jobs == [] and c.tags_of(v, "c0") == ()
    finally:
        rt.close()
        lowkiq.runtime._current = None


def test_drained_jobs_leave_the_index_and_a_first_failure_keeps_its_tags_in_the_morgue(configure, r):
    from lowkiq.testing import drain

    class Tagged(lowkiq.Worker):
        shards_count = 2
        max_retry_count = 0

        def perform(self, payloads_by_id):
            if "bad" in payloads_by_id:
                raise RuntimeError("boom")

    rt = configure(workers=[Tagged])
    c = Console.from_runtime(rt, redis_timeout=30)
    v = c.worker("Tagged")
    Tagged.perform_async([{"id": "ok", "tags": ["vip"]}, {"id": "bad", "tags": ["vip"]}])
    drain(Tagged, raise_errors=False)
    page = c.tagged(v, "vip", limit=10)
    assert [(job.id, job.queued, job.busy, job.dead) for job in page.jobs] == [("bad", False, False, True)]
    assert c.tags_of(v, "ok") == ()
