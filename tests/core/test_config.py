import pytest

import lowkiq
from lowkiq.config import build_settings
from lowkiq.store.keys import QueueKeys, ShardKeys


class A(lowkiq.Worker):
    def perform(self, payloads_by_id):
        pass


def test_defaults():
    s = build_settings({"workers": [A]}, environ={})
    assert (s.threads_per_node, s.poll_interval, s.client_pool_size, s.pool_timeout) == (5, 1.0, 5, 5.0)
    assert s.redis_url is None  # embedded
    assert (s.build_scheduler, s.build_splitter, s.number_of_nodes, s.node_number) == ("lag", None, 1, 0)
    assert s.ttin_file == "/tmp/lowkiq_ttin.txt"
    assert (A.shards_count, A.batch_size, A.max_retry_count, A.queue_name) == (5, 1, 25, "A")


def test_redis_url_falls_back_to_lowkiq_redis_url_then_redis_url():
    assert build_settings({}, environ={"REDIS_URL": "redis://b"}).redis_url == "redis://b"
    assert build_settings({}, environ={"REDIS_URL": "redis://b", "LOWKIQ_REDIS_URL": "redis://a"}).redis_url == "redis://a"
    assert build_settings({"redis_url": "redis://c"}, environ={"LOWKIQ_REDIS_URL": "redis://a"}).redis_url == "redis://c"


def test_environment_fallbacks_and_explicit_options_win():
    env = {"LOWKIQ_THREADS_PER_NODE": "8", "LOWKIQ_POLL_INTERVAL": "0.25", "LOWKIQ_NUMBER_OF_NODES": "3",
           "LOWKIQ_NODE_NUMBER": "2", "LOWKIQ_SCHEDULER": "seq", "LOWKIQ_CLIENT_POOL_SIZE": "9", "LOWKIQ_POOL_TIMEOUT": "2"}
    s = build_settings({}, environ=env)
    assert (s.threads_per_node, s.poll_interval, s.number_of_nodes, s.node_number, s.build_scheduler) == (8, 0.25, 3, 2, "seq")
    assert (s.client_pool_size, s.pool_timeout) == (9, 2.0)
    assert build_settings({"threads_per_node": 2}, environ=env).threads_per_node == 2


@pytest.mark.parametrize(
    "options, env, message",
    [
        ({"threads": 3}, {}, r"unknown options \['threads'\]"),
        ({"threads_per_node": 0}, {}, "threads_per_node must be an int >= 1"),
        ({"number_of_nodes": 2, "node_number": 2}, {}, r"node_number must be in 0..1"),
        ({"poll_interval": 0}, {}, "poll_interval must be a number > 0"),
        ({"lease_ttl": 1}, {}, "lease_ttl must be a number of seconds >= 2"),
        ({"lease_ttl": 2, "heartbeat_interval": 1}, {}, r"heartbeat_interval \(1\) must be at most lease_ttl / 3"),
        ({"crash_limit": 0}, {}, "crash_limit must be an int >= 1"),
        ({}, {"LOWKIQ_LEASE_TTL": "soon"}, "LOWKIQ_LEASE_TTL='soon' is not a valid lease_ttl"),
        ({}, {"LOWKIQ_THREADS_PER_NODE": "many"}, "LOWKIQ_THREADS_PER_NODE='many' is not a valid threads_per_node"),
        ({"workers": [object]}, {}, "workers must be lowkiq.Worker subclasses"),
        ({"workers": A}, {}, "workers must be a list"),
    ],
)
def test_bad_settings_are_clear_errors(options, env, message):
    with pytest.raises((TypeError, ValueError), match=message):
        build_settings(options, environ=env)


def test_two_workers_on_one_queue_are_refused():
    class B(lowkiq.Worker):
        queue_name = "A"

        def perform(self, payloads_by_id):
            pass

    with pytest.raises(ValueError, match="share the queue_name 'A'"):
        build_settings({"workers": [A, B]}, environ={})


@pytest.mark.parametrize("attrs, message", [
    ({"shards_count": 0}, "shards_count must be a positive int"),
    ({"batch_size": 0}, "batch_size must be a positive int"),
    ({"max_retry_count": True}, "max_retry_count must be an int >= 0"),
    ({"max_retry_count": -1}, "max_retry_count must be an int >= 0"),
    ({"queue_name": "a{b}"}, "must not contain"),
])
def test_bad_worker_classes_fail_at_definition(attrs, message):
    with pytest.raises(ValueError, match=message):
        type("Bad", (lowkiq.Worker,), attrs)


def test_queue_name_defaults_to_the_class_name_even_in_subclasses():
    class Base(lowkiq.Worker):
        queue_name = "base"

    class Child(Base):
        pass

    assert (Base.queue_name, Child.queue_name) == ("base", "Child")


def crc16(data: bytes) -> int:
    # Redis Cluster's key hash (CRC16/XMODEM)
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot(key: str) -> int:
    start = key.index("{")
    end = key.index("}", start + 1)
    return crc16(key[start + 1 : end].encode()) % 16384


def test_every_key_a_script_touches_is_in_its_shards_hash_slot():
    keys = QueueKeys("orders:eu", 24)
    slots = set()
    for shard in keys.shards():
        shard_slots = {slot(k) for k in shard.all()}
        assert len(shard_slots) == 1
        assert all(k.startswith("lowkiq:v1:{orders:eu:") for k in shard.all())
        slots |= shard_slots
    assert len(slots) > 12  # shards spread over the cluster
    assert len(set(ShardKeys("q", 0).all())) == 31


def test_the_scripts_keys_are_defined_once_and_every_one_is_used():
    import re
    from importlib import resources

    from lowkiq.store.keys import SCRIPT_KEYS, lua_prelude

    names = [name for name, _ in SCRIPT_KEYS]
    folder = resources.files("lowkiq.store.scripts")
    used = set()
    for entry in folder.iterdir():
        if entry.name.endswith(".lua"):
            text = entry.read_text(encoding="utf-8")
            # Only the scripts of the one {lowkiq} slot (membership, layouts, audit, pauses, history) and the
            # registry's, and a bulk action's confirmation (its own slot), take other keys than a shard's; the
            # schedule scripts take a shard's keys and then one more of its slot, the schedules hash (the last);
            # a group's permits live in the group's own slot.
            on_lowkiq_slot = entry.name.startswith(("member_", "layout.", "audit.", "pause.", "history.",
                                                    "registry_", "confirm_take.", "schedule_", "permit_"))
            assert "KEYS[" not in text or on_lowkiq_slot, f"{entry.name} indexes KEYS itself"
            used |= set(re.findall(r"\bK_[A-Z_]+\b", text))
    assert used == set(names)
    assert lua_prelude().splitlines()[0] == "local K_READY = KEYS[1]"
    assert ShardKeys("q", 0).all()[names.index("K_LEASE")] == ShardKeys("q", 0).lease_hash


def test_each_script_carries_only_the_library_definitions_it_uses():
    from lowkiq.store import lua

    a = "-- header\nlocal A = 1\n\n"
    b = "-- b uses A\nlocal function b()\n  -- inside\n  return A\nend\n\n"
    lib = a + b + "local function c()\n  return 2\nend\n"
    assert lua.used_definitions(lib, "return b()") == a + b
    assert lua.used_definitions(lib, "return c()") == "local function c()\n  return 2\nend\n"
    assert lua.used_definitions(lib, "return 1") == ""
    hot = lua.script("ack_and_take").source
    assert "local function refusal(" in hot and "local function merge_payloads(" not in hot
    assert "local function merge_payloads(" in lua.script("push").source


def test_every_option_of_the_table_is_in_the_docs_and_the_command_line_help():
    from docs_support import DOCS

    from lowkiq.cli import parser
    from lowkiq.options import OPTIONS

    table = (DOCS / "configuration.md").read_text()
    help_text = parser().format_help()
    for option in OPTIONS:
        assert f"`{option.name}`" in table, option.name
        assert option.env is None or f"`{option.env}`" in table, option.env
        if option.flag:
            assert option.flag in help_text and f"[{option.env}]" in help_text.replace("\n", " ").replace("  ", " ")


@pytest.mark.parametrize("variable, value", [
    ("LOWKIQ_THREADS_PER_NODE", "5 "), ("LOWKIQ_THREADS_PER_NODE", "5.0"), ("LOWKIQ_THREADS_PER_NODE", ""),
    ("LOWKIQ_POLL_INTERVAL", "nan"), ("LOWKIQ_POLL_INTERVAL", "inf"), ("LOWKIQ_POLL_INTERVAL", "1s"),
    ("LOWKIQ_SCHEDULER", "LAG"), ("LOWKIQ_MEMBER_NAME", " pod"),
])
def test_environment_values_are_parsed_strictly_and_errors_name_the_variable(variable, value):
    with pytest.raises(ValueError, match=f"environment variable {variable}="):
        build_settings({}, environ={variable: value})
