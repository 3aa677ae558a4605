"""The transport on a real Redis Cluster: routing, redirections, scripts missing on a node, partial writes."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from cluster_support import close_migration, migrate_keys, move_slot, open_migration, other_primary
from queue_support import RoundTrips

import lowkiq
from lowkiq.store import codec, lua
from lowkiq.store.keys import ShardKeys, registry_hash
from lowkiq.transport import Batch, PartialWrite, TopologyError, Transport, keyset_slot
from lowkiq.transport.resp import pack

# the range script's arguments for "every id of the shard, by id"
RANGE_ALL = ("id", "0", "", "", "", "", 100)

# A Redis Cluster or Sentinels of its own: minutes of setup the fast run leaves out.
pytestmark = pytest.mark.slow


class Jobs(lowkiq.Worker):
    queue_name = "transport"
    shards_count = 16

    def perform(self, payloads_by_id):
        pass


def port_of(node_name: str) -> int:
    return int(node_name.rpartition(":")[2])


def shard_on(cluster, port: int) -> ShardKeys:
    """A shard of Jobs whose slot the primary on ``port`` owns."""
    return next(s for s in Jobs.keys().shards() if cluster.owner(cluster.keyslot(s.tag)) == port)


def ids_of(shard: ShardKeys, *names: str) -> list[str]:
    """Job ids that fall into ``shard``, one per name: the name and a suffix."""
    out = []
    for name in names:
        candidates = (f"{name}{n}" for n in range(1000))
        out.append(next(i for i in candidates if codec.shard_of(i, Jobs.shards_count) == shard.shard))
    return out


def enqueue(shard: ShardKeys, *names: str) -> list[str]:
    ids = ids_of(shard, *names)
    Jobs.perform_async([{"id": i} for i in ids])
    return ids


def listed(shard: ShardKeys | None = None) -> list[str]:
    rows = lowkiq.current().queries(Jobs).enqueued(order_by="id", limit=1000).rows
    return [j.id for j in rows if shard is None or codec.shard_of(j.id, Jobs.shards_count) == shard.shard]


@pytest.fixture
def transport(cluster):
    runtime = lowkiq.configure(redis_url=cluster.url, workers=[Jobs])
    yield runtime.client
    runtime.close()
    lowkiq.runtime._current = None


def test_a_node_url_is_detected_as_a_cluster_with_its_primaries_and_replicas(transport, cluster):
    assert transport.mode == "cluster"
    topology = transport.topology()
    assert sorted(port_of(n.name) for n in topology.primaries) == cluster.primaries()
    assert len(topology.replicas) == 3
    assert "Redis Cluster of 3 primaries" in transport.describe()


@pytest.mark.slow
def test_plain_commands_go_to_their_nodes_one_send_per_node_replies_in_order(transport, cluster, monkeypatch):
    keys = [f"key:{i}" for i in range(300)]
    assert {cluster.owner(cluster.keyslot(k)) for k in keys} == set(cluster.primaries())
    transport.pipeline_commands([(k, ("GET", k)) for k in keys])  # connections made
    trips = RoundTrips(monkeypatch)
    assert transport.pipeline_commands([(k, ("SET", k, i)) for i, k in enumerate(keys)]) == [b"OK"] * 300
    assert trips.count == 3
    got = transport.pipeline_commands([(k, ("GET", k)) for k in reversed(keys)])
    assert got == [str(i).encode() for i in reversed(range(300))]
    for port in cluster.primaries():
        assert cluster.client(port).dbsize() == sum(1 for k in keys if cluster.owner(cluster.keyslot(k)) == port)


def test_scripts_on_shards_of_every_primary_in_one_step(transport, cluster):
    shards = [shard_on(cluster, port) for port in cluster.primaries()]
    ids = [enqueue(shard, "j")[0] for shard in shards]  # a registry write too, on its own node
    assert sorted(listed()) == sorted(ids)
    for job_id, shard in zip(ids, shards, strict=True):
        owner = cluster.client(cluster.owner(keyset_slot(shard)))
        assert owner.zrange(shard.ids_lex_zset, 0, -1) == [job_id.encode()]
    assert transport.hgetall(registry_hash())[b"Jobs"]


def test_every_node_answers_info_with_its_role(transport, cluster):
    replies = transport.each_node(("INFO", "replication"))
    assert len(replies) == 6
    roles = {port_of(r.name): r.reply.decode().split("role:")[1].split()[0] for r in replies}
    assert {p for p, role in roles.items() if role == "master"} == set(cluster.primaries())
    assert all(r.primary == (roles[port_of(r.name)] == "master") for r in replies)


def test_a_database_other_than_0_on_a_cluster_is_a_clear_error(cluster):
    t = Transport(cluster.url.replace("/0", "/2"))
    with pytest.raises(TopologyError, match="only database 0"):
        t.topology()


def test_redis_py_commands_are_sent_to_the_node_of_their_key(transport, cluster):
    for i in range(30):
        transport.hset(f"h{i}", "f", i)
        assert transport.client_for(f"h{i}").hget(f"h{i}", "f") == str(i).encode()
    assert transport.execute_command("HGET", "h7", "f") == b"7"
    assert transport.ping()
    pipe = transport.pipeline(transaction=False)
    pipe.time()
    for i in range(30):
        pipe.hget(f"h{i}", "f")
    pipe.execute_command("ZRANGE", "z", 0, -1, "WITHSCORES")
    (seconds, _), *values, empty = pipe.execute()
    assert seconds > 0 and values == [str(i).encode() for i in range(30)] and empty == []
    with pytest.raises(TypeError, match="client_for"):
        transport.pipeline()  # a transaction cannot span nodes


def test_moved_after_a_slot_changed_owner_refreshes_the_map_and_resends(transport, cluster):
    shard = shard_on(cluster, cluster.primaries()[0])
    slot = keyset_slot(shard)
    ids = enqueue(shard, "a", "b")
    before = transport.topology()
    source = cluster.owner(slot)
    target = other_primary(cluster, source)
    move_slot(cluster, slot, target)
    try:
        assert listed(shard) == ids
        after = transport.topology()
        assert after.generation > before.generation
        assert port_of(after.node_for(slot).name) == target
        assert enqueue(shard, "c")
        assert cluster.client(target).zcard(shard.ids_lex_zset) == 3
    finally:
        move_slot(cluster, slot, source)


def test_ask_during_a_migration_goes_to_the_importing_node_without_a_new_map(transport, cluster):
    key = "{asked}:k"
    slot = cluster.keyslot(key)
    source = cluster.owner(slot)
    target = other_primary(cluster, source)
    transport.pipeline_commands([(key, ("SET", key, "v"))])
    generation = transport.topology().generation
    open_migration(cluster, slot, target)
    try:
        migrate_keys(cluster, slot, source, target)
        assert cluster.client(source).execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 0
        assert transport.pipeline_commands([(key, ("GET", key))]) == [b"v"]
        # a one-key script: the same ASK, then ASKING on the importing node
        script = Batch([pack(("EVAL", "return redis.call('INCR', KEYS[1])", 1, "{asked}:n"))], [slot])
        assert transport.execute(script)[0] == [1]
        assert cluster.client(target).execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 2  # k and n
        assert transport.topology().generation == generation
    finally:
        close_migration(cluster, slot, target)
        move_slot(cluster, slot, source)


def test_a_shard_script_waits_out_a_migration_with_tryagain_and_follows_the_move(transport, cluster):
    shard = shard_on(cluster, cluster.primaries()[1])
    slot = keyset_slot(shard)
    ids = enqueue(shard, "x", "y")
    source = cluster.owner(slot)
    target = other_primary(cluster, source)
    open_migration(cluster, slot, target)
    migrate_keys(cluster, slot, source, target, [shard.ids_lex_zset])  # the shard is split between two nodes

    def finish():
        time.sleep(0.3)
        migrate_keys(cluster, slot, source, target)
        close_migration(cluster, slot, target)

    finisher = threading.Thread(target=finish)
    finisher.start()
    try:
        started = time.monotonic()
        assert listed(shard) == ids
        assert time.monotonic() - started >= 0.25
        finisher.join()
        assert port_of(transport.topology().node_for(slot).name) == target
    finally:
        finisher.join()
        cluster.wait_ok()
        move_slot(cluster, slot, source)


def test_noscript_after_a_script_flush_on_one_node_loads_it_there(transport, cluster):
    shards = [shard_on(cluster, port) for port in cluster.primaries()]
    ids = sorted(enqueue(shard, "j")[0] for shard in shards)
    cluster.client(cluster.primaries()[0]).script_flush()
    assert sorted(listed()) == ids
    sha = lua.script("range").sha
    assert all(cluster.client(p).script_exists(sha) == [True] for p in cluster.primaries())


def test_partial_write_names_the_calls_that_ran(transport, cluster):
    good, bad = shard_on(cluster, cluster.primaries()[0]), shard_on(cluster, cluster.primaries()[1])
    transport.pipeline_commands([(bad.ids_lex_zset, ("SET", bad.ids_lex_zset, "not a zset"))])
    [a], [b] = ids_of(bad, "a"), ids_of(good, "b")
    with pytest.raises(lowkiq.PartialEnqueue) as enqueued:
        Jobs.perform_async([{"id": a}, {"id": b}])
    assert (enqueued.value.written, enqueued.value.not_written) == ([1], [0])
    partial = enqueued.value.__cause__
    assert isinstance(partial, PartialWrite) and partial.written_keysets == [good] and partial.uncertain == []
    [(refused, error)] = partial.errors.items()
    assert partial.keysets[refused] == bad and isinstance(error, redis.ResponseError)
    assert "WRONGTYPE" in str(partial) and "1 of 2 calls were written" in str(partial)
    # an action on every shard names the one that refused; it visits only the shards that hold jobs
    with pytest.raises(PartialWrite) as raised:
        lowkiq.current().actions(Jobs).delete_all()
    assert [raised.value.keysets[i] for i in raised.value.errors] == [bad]
    assert raised.value.written_keysets == [good]
    transport.delete(bad.ids_lex_zset)
    assert listed() == []


def test_a_lost_node_is_named_and_the_next_call_finds_it_again(transport, cluster):
    shard = shard_on(cluster, cluster.primaries()[2])
    [job_id] = enqueue(shard, "z")
    wire = lua.Wire(transport)
    assert wire.call("range", shard, RANGE_ALL)
    port = cluster.owner(keyset_slot(shard))
    cluster.client(port).client_kill_filter(_type="normal", skipme=True)
    with pytest.raises(redis.ConnectionError, match=f"127.0.0.1:{port}"):
        wire.call("range", shard, RANGE_ALL)
    assert wire.call("range", shard, RANGE_ALL)[0] == job_id.encode()
    wire.close()


