"""Fencing tokens only ever grow for an id: over the grants of its shard, when --change-layout moves it
to another shard, and when Redis lost every key (FLUSHALL, a restart without persistence).

A store fenced as the README shows (``WHERE fence <= token``) silently drops the write of a token lower
than one it saw, so each test compares a token given after the event with every token given before it.
"""

from __future__ import annotations

import pytest
import redis
from redis_server import RedisServer
from server_support import APP, run_cli

import lowkiq
from lowkiq.config import build_settings
from lowkiq.runtime import Runtime
from lowkiq.server.holdings import Holdings
from lowkiq.store import layout, lua
from lowkiq.store.codec import shard_of
from lowkiq.store.leases import Lease
from lowkiq.worker import Shard


class FourShards(lowkiq.Worker):
    queue_name = "Recorder"  # the queue of tests/apps/app.py, whose layout the CLI changes below
    shards_count = 4

    def perform(self, payloads_by_id):
        pass


class TwoShards(FourShards):
    queue_name = "Recorder"  # a subclass's queue is its own name unless it says otherwise
    shards_count = 2


def runtime_of(worker: type[lowkiq.Worker], redis_url: str) -> Runtime:
    return Runtime(build_settings({"workers": [worker], "redis_url": redis_url}))


def grant(runtime: Runtime, worker: type[lowkiq.Worker], shard: int, member: str = "m") -> Lease:
    """A grant of the shard's lease, released at once so that the next one is granted too."""
    wire = lua.Wire(runtime.client)
    try:
        [got] = Holdings(runtime, member).acquire(wire, [Shard(worker, shard)], ttl=30)
    finally:
        wire.close()
    assert isinstance(got, Lease), got
    lua.run(runtime.client, "release", got.keys, (got.grant,))
    return got


def redis_now_us(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return seconds * 1_000_000 + micros


def test_every_grant_of_a_shard_has_a_higher_token_at_least_redis_clock(r, redis_url):
    runtime = runtime_of(FourShards, redis_url)
    before = redis_now_us(r)
    tokens = [grant(runtime, FourShards, 0, member).fencing_token for member in ("a", "b", "a", "c")]
    assert tokens == sorted(set(tokens))  # strictly rising
    assert all(cfg == 0 for cfg, _ in tokens)  # outside a cluster
    assert before <= tokens[0][1] <= redis_now_us(r)
    # A counter of grants stays beside the token (the console shows it).
    assert int(r.hget(FourShards.keys().shard(0).lease_hash, "epoch")) == 4
    runtime.close()


def test_a_stored_fence_ahead_of_the_clock_still_rises_by_one(r, redis_url):
    """Redis's clock stepped back (or a failover went to a replica whose clock is behind): the shard's own
    tokens keep rising from what it stored."""
    runtime = runtime_of(FourShards, redis_url)
    ahead = redis_now_us(r) + 3_600_000_000
    r.hset(FourShards.keys().shard(1).lease_hash, "fence", ahead)
    assert grant(runtime, FourShards, 1).fencing_token == (0, ahead + 1)
    runtime.close()


@pytest.mark.slow
def test_an_id_moved_by_change_layout_from_the_command_line_gets_a_higher_token(tmp_path, r, redis_url):
    four = runtime_of(FourShards, redis_url)
    four.register([FourShards])  # records 4 shards, as its producers and servers did
    job_id = next(str(i) for i in range(1000) if shard_of(str(i), 4) == 3 and shard_of(str(i), 2) == 1)
    # The id's old shard was granted three times, its new shard once: before, their tokens were
    # (0, 3) and (0, 2) after the move.
    before = [grant(four, FourShards, 3).fencing_token for _ in range(3)]
    grant(four, FourShards, 1)
    done = run_cli(tmp_path, "-r", str(APP), "--redis-url", redis_url, "--change-layout", "Recorder",
                   env={"APP_RECORD_DIR": str(tmp_path), "APP_SHARDS": "2"})
    assert done.returncode == 0, done.stderr
    assert "4 shards recorded before, 2 now" in done.stdout
    two = runtime_of(TwoShards, redis_url)
    assert two.queue(TwoShards).shard_of(job_id) == 1
    after = grant(two, TwoShards, 1).fencing_token
    assert after > max(before), (after, before)
    four.close(), two.close()


def test_change_layout_lifts_the_new_shards_above_a_token_stamped_by_a_clock_that_was_ahead(r, redis_url):
    """The old shard's last grant carries a fence an hour ahead of Redis's clock now (the clock stepped
    back since): the layout change itself raises every new shard above it."""
    four = runtime_of(FourShards, redis_url)
    four.register([FourShards])
    r.hset(FourShards.keys().shard(3).lease_hash, "fence", redis_now_us(r) + 3_600_000_000)
    highest = grant(four, FourShards, 3).fencing_token
    assert layout.change(four.client, TwoShards) == 4
    two = runtime_of(TwoShards, redis_url)
    for shard in range(2):
        assert grant(two, TwoShards, shard).fencing_token > highest
    four.close(), two.close()


def test_a_token_after_flushall_is_higher_than_every_token_before(r, redis_url):
    runtime = runtime_of(FourShards, redis_url)
    before = max(grant(runtime, FourShards, shard).fencing_token for shard in range(4) for _ in range(2))
    r.flushall()
    after = [grant(runtime, FourShards, shard).fencing_token for shard in range(4)]
    assert min(after) > before, (after, before)
    runtime.close()


def test_a_token_after_a_restart_without_persistence_is_higher_than_every_token_before():
    server = RedisServer(appendonly=False).start()
    try:
        runtime = runtime_of(FourShards, server.url)
        before = max(grant(runtime, FourShards, shard).fencing_token for shard in range(4))
        runtime.close()
        server.stop()
        server.start()  # same port, no RDB, no AOF: every key is gone
        assert redis.Redis(port=server.port).dbsize() == 0
        runtime = runtime_of(FourShards, server.url)
        after = [grant(runtime, FourShards, shard).fencing_token for shard in range(4)]
        assert min(after) > before, (after, before)
        runtime.close()
    finally:
        server.stop()


@pytest.mark.slow
def test_on_a_cluster_the_token_leads_with_the_cluster_epoch_and_change_layout_lifts_every_node(cluster):
    four = runtime_of(FourShards, cluster.url)
    four.register([FourShards])
    shards = FourShards.keys().shards()
    assert len({cluster.owner(cluster.keyslot(s.tag)) for s in shards}) > 1  # spread over primaries
    current = max(int(cluster.client(port).cluster("info")["cluster_current_epoch"]) for port in cluster.primaries())
    tokens = [grant(four, FourShards, shard).fencing_token for shard in range(4)]
    assert all(cfg == current for cfg, _ in tokens), (tokens, current)
    # A shard of one primary whose token is far ahead: after the change every shard, whatever its node, is above.
    ahead = shards[3]
    cluster.client(cluster.owner(cluster.keyslot(ahead.tag))).hset(ahead.lease_hash, mapping={
        "cfg_epoch": current + 5, "fence": 1})
    highest = grant(four, FourShards, 3).fencing_token
    assert highest[0] == current + 5
    assert layout.change(four.client, TwoShards) == 4
    two = runtime_of(TwoShards, cluster.url)
    for shard in range(2):
        assert grant(two, TwoShards, shard).fencing_token > highest
    four.close(), two.close()
