"""Producers and servers that disagree on a queue's shards_count are refused; the layout changes only on purpose."""

from __future__ import annotations

import pytest
import redis
from cli_support import one_line_error
from queue_support import held_lease
from redis_server import RedisServer
from server_support import APP, run_cli

import lowkiq
from lowkiq.config import build_settings
from lowkiq.runtime import Runtime
from lowkiq.store import layout
from lowkiq.store.keys import QueueKeys, registry_hash

LAYOUTS = layout.LAYOUT_KEYS.layouts_hash


class FiveShards(lowkiq.Worker):
    queue_name = "orders"
    shards_count = 5

    def perform(self, payloads_by_id):
        pass


class SixShards(lowkiq.Worker):
    queue_name = "orders"
    shards_count = 6

    def perform(self, payloads_by_id):
        pass


def runtime_of(worker: type[lowkiq.Worker], redis_url: str) -> Runtime:
    """A producer process of its own: its own runtime, as another host would have."""
    return Runtime(build_settings({"workers": [worker], "redis_url": redis_url}))


def test_a_producer_with_another_shards_count_is_refused_and_writes_nothing(r, redis_url):
    first, second = runtime_of(FiveShards, redis_url), runtime_of(SixShards, redis_url)
    assert first.enqueue(FiveShards, [{"id": "a", "payload": 1}]) == 1
    keys_before = sorted(r.keys("*"))
    with pytest.raises(lowkiq.LayoutMismatch) as raised:
        second.enqueue(SixShards, [{"id": f"id-{i}", "payload": i} for i in range(50)])
    assert (raised.value.here, raised.value.recorded, raised.value.queue_name) == (6, 5, "orders")
    assert "shards_count is 6 here" in str(raised.value) and "split into 5 shards" in str(raised.value)
    assert "--change-layout SixShards" in str(raised.value)
    assert sorted(r.keys("*")) == keys_before  # no job, no registry entry
    first.close(), second.close()


def test_two_workers_of_one_app_on_one_queue_must_agree(r, redis_url):
    with pytest.raises(lowkiq.LayoutMismatch, match="split into 5 shards"):
        layout.claim(runtime_of(FiveShards, redis_url).client, [FiveShards, SixShards])
    assert layout.recorded(runtime_of(FiveShards, redis_url).client, "orders") is None


@pytest.mark.slow
def test_a_server_with_another_shards_count_exits_with_one_line(tmp_path, r, redis_url):
    r.hset(LAYOUTS, "Recorder", 9)
    line = one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", redis_url,
                                  env={"APP_RECORD_DIR": str(tmp_path), "APP_SHARDS": "4"}))
    assert "Recorder: shards_count is 4 here, but queue 'Recorder' is split into 9 shards" in line
    assert not r.exists(registry_hash())


def test_change_layout_waits_for_an_empty_queue_then_lets_the_new_count_in(tmp_path, r, redis_url):
    five = runtime_of(FiveShards, redis_url)
    five.enqueue(FiveShards, [{"id": f"id-{i}", "payload": i} for i in range(20)])
    with pytest.raises(layout.LayoutChangeRefused, match="still holds 20 jobs"):
        layout.change(five.client, SixShards)
    q = five.queue(FiveShards)
    for shard in range(5):  # drained by a server: taken, then acknowledged
        lease = held_lease(q, shard, runtime=five)
        taken = q.ack_and_take(None, (lease, 100))
        q.ack_and_take((lease, [job.id for job in taken.jobs]), None)
    assert layout.jobs_held(five.client, QueueKeys("orders", 5)) == 0
    assert layout.change(five.client, SixShards) == 5
    assert layout.recorded(five.client, "orders") == 6
    six = runtime_of(SixShards, redis_url)
    assert six.enqueue(SixShards, [{"id": "new", "payload": 1}]) == 1
    with pytest.raises(lowkiq.LayoutMismatch, match="shards_count is 5 here"):
        runtime_of(FiveShards, redis_url).enqueue(FiveShards, [{"id": "old", "payload": 1}])
    five.close(), six.close()


@pytest.mark.slow
def test_change_layout_from_the_command_line(tmp_path, r, redis_url):
    r.hset(LAYOUTS, "Recorder", 9)
    done = run_cli(tmp_path, "-r", str(APP), "--redis-url", redis_url, "--change-layout", "Recorder",
                   env={"APP_RECORD_DIR": str(tmp_path), "APP_SHARDS": "4"})
    assert done.returncode == 0, done.stderr
    assert "9 shards recorded before, 4 now" in done.stdout
    assert r.hget(LAYOUTS, "Recorder") == b"4"
    assert "no such worker" in one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", redis_url,
                                                      "--change-layout", "Nope", env={"APP_RECORD_DIR": str(tmp_path)}))


@pytest.mark.slow
def test_startup_errors_are_one_line(tmp_path, cluster):
    env = {"APP_RECORD_DIR": str(tmp_path)}
    line = one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", "http://127.0.0.1:6379/0", env=env))
    assert "redis_url http://127.0.0.1:6379/0" in line and "redis://" in line
    line = one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", cluster.url[:-1] + "3", env=env))
    assert "only database 0" in line
    guarded = RedisServer().start()
    try:
        redis.Redis(port=guarded.port).config_set("requirepass", "right-one")
        url = f"redis://:wrong-one@127.0.0.1:{guarded.port}/0"
        line = one_line_error(run_cli(tmp_path, "-r", str(APP), "--redis-url", url, env=env))
        assert "cannot reach Redis at" in line and "wrong-one" not in line
    finally:
        guarded.stop()
