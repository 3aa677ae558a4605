"""A queue's shard keys: built once per queue, because a producer makes a Queue per ``perform_async`` call and a
worker may have thousands of shards (building them all per call was half of a one-job enqueue's CPU)."""

from __future__ import annotations

from lowkiq.store.keys import QueueKeys, ShardKeys


def test_shards_are_built_once_per_queue_and_each_call_gets_its_own_list():
    first, again = QueueKeys("orders", 500).shards(), QueueKeys("orders", 500).shards()
    assert all(a is b for a, b in zip(first, again, strict=True))
    first.clear()  # a caller's list is its own: the cached keys stay whole
    assert len(QueueKeys("orders", 500).shards()) == 500


def test_each_shard_s_keys_are_its_own():
    keys = QueueKeys("orders", 3).shards()
    assert keys == [ShardKeys("orders", 0), ShardKeys("orders", 1), ShardKeys("orders", 2)]
    assert QueueKeys("other", 3).shards()[0].queue_name == "other"
    assert len(QueueKeys("orders", 4).shards()) == 4
