"""Which thread owns which shard: SPEC's example, by-node, custom splitters, and the checks on them."""

import pytest

import lowkiq
from lowkiq.config import build_settings
from lowkiq.server import splitters
from lowkiq.server.splitters import Shard


def worker(name: str, shards: int) -> type[lowkiq.Worker]:
    return type(name, (lowkiq.Worker,), {"shards_count": shards, "perform": lambda self, batch: None})


A, B, C, D = worker("A", 3), worker("B", 4), worker("C", 1), worker("D", 2)
WORKERS = [A, B, C, D]


def names(parts):
    return [" ".join(map(str, part)) for part in parts]


def settings(**options):
    """Lowkiq's splitters are opt-in (the threads share the shards by default): these tests pin them."""
    return build_settings({"workers": WORKERS, "build_splitter": "default", **options}, environ={})


def test_shards_are_listed_worker_by_worker():
    assert " ".join(map(str, splitters.all_shards(WORKERS))) == "A0 A1 A2 B0 B1 B2 B3 C0 D0 D1"


def test_default_deals_round_robin_as_in_the_spec():
    parts = splitters.default(3)(splitters.all_shards(WORKERS))
    assert names(parts) == ["A0 B0 B3 D1", "A1 B1 C0", "A2 B2 D0"]


def test_by_node_deals_to_nodes_first_then_to_threads():
    shards = splitters.all_shards(WORKERS)
    node0 = splitters.by_node(2, 0, 2)(shards)
    node1 = splitters.by_node(2, 1, 2)(shards)
    # nodes get A0 A2 B1 B3 D0 and A1 B0 B2 C0 D1, then each deals to its two threads
    assert names(node0) == ["A0 B1 D0", "A2 B3"]
    assert names(node1) == ["A1 B2 D1", "B0 C0"]
    every = [s for part in node0 + node1 for s in part]
    assert sorted(every, key=str) == sorted(shards, key=str)
    assert len(set(every)) == len(every)


@pytest.mark.parametrize("nodes", [1, 2, 3, 7, 11])
def test_by_node_covers_every_shard_exactly_once(nodes):
    shards = splitters.all_shards(WORKERS)
    owned = [s for n in range(nodes) for part in splitters.by_node(nodes, n, 4)(shards) for s in part]
    assert sorted(owned, key=str) == sorted(shards, key=str)


def test_more_threads_than_shards_leaves_threads_empty():
    parts = splitters.default(4)([Shard(C, 0), Shard(D, 0)])
    assert names(parts) == ["C0", "D0", "", ""]


def test_build_picks_by_node_from_settings_and_environment():
    assert names(splitters.assign(settings(threads_per_node=3))) == ["A0 B0 B3 D1", "A1 B1 C0", "A2 B2 D0"]
    by_env = build_settings({"workers": WORKERS, "threads_per_node": 2},
                            environ={"LOWKIQ_NUMBER_OF_NODES": "2", "LOWKIQ_NODE_NUMBER": "1", "LOWKIQ_SPLITTER": "by_node"})
    assert names(splitters.assign(by_env)) == ["A1 B2 D1", "B0 C0"]


def test_several_nodes_never_share_shards_even_with_the_default_splitter():
    parts = splitters.assign(settings(threads_per_node=2, number_of_nodes=2, node_number=0))
    assert names(parts) == ["A0 B1 D0", "A2 B3"]


def test_custom_splitter_callable():
    def one_thread_per_worker(s):
        return lambda shards: [[x for x in shards if x.worker is w] for w in s.workers]

    parts = splitters.assign(settings(build_splitter=one_thread_per_worker))
    assert names(parts) == ["A0 A1 A2", "B0 B1 B2 B3", "C0", "D0 D1"]


def test_a_splitter_giving_one_shard_to_two_threads_is_refused():
    with pytest.raises(ValueError, match="two threads"):
        splitters.assign(settings(build_splitter=lambda s: lambda shards: [shards, shards[:1]]))


def test_a_splitter_inventing_shards_is_refused():
    with pytest.raises(ValueError, match="not a shard"):
        splitters.assign(settings(build_splitter=lambda s: lambda shards: [[Shard(A, 9)]]))


def test_unknown_splitter_name():
    with pytest.raises(ValueError, match="unknown splitter"):
        splitters.assign(settings(build_splitter="random"))
