"""The audit log names only verified identities and is bounded in bytes: per entry, and as a list."""

from __future__ import annotations

import base64
import json

import pytest
from webui_support import OrdersWorker, host_app, make_dead

from lowkiq.store import audit, lua, registry
from lowkiq.webui import create_app

API = "/api/v1/workers/OrdersWorker"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def used_memory(r) -> int:
    return int(r.info("memory")["used_memory"])


def stored(r) -> list[bytes]:
    return r.lrange(audit.AUDIT_KEYS.audit_list, 0, -1)


# ---- who ----------------------------------------------------------------------------------


def test_a_basic_auth_name_nobody_checked_is_not_recorded(redis_url, runtime):
    registry.register(runtime.client, [OrdersWorker])
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()  # no password
    reply = client.post(API + "/perform_all_now", headers=basic("alice-the-admin", "anything"))
    assert reply.status_code == 200
    entries = audit.read(runtime.client)  # a whole-queue action: an entry when it starts, one when it ends
    assert entries and {e.who for e in entries} == {"anonymous (127.0.0.1)"}
    assert "alice" not in json.dumps([e.as_json() for e in entries])


def test_in_a_host_app_only_its_hook_names_someone(runtime):
    forged = basic("alice-the-admin", "x")
    host_app().test_client().post("/lowkiq" + API + "/perform_all_now", headers=forged)
    named = host_app(LOWKIQ_WEB_CURRENT_USER=lambda: "bob@example.com").test_client()
    named.post("/lowkiq" + API + "/perform_all_now", headers=forged)
    whos = [e.who for e in reversed(audit.read(runtime.client))]
    assert whos[0] == "anonymous (127.0.0.1)" and whos[-1] == "bob@example.com"
    assert set(whos) == {"anonymous (127.0.0.1)", "bob@example.com"}


def test_the_console_s_own_user_is_recorded_once_its_password_is_verified(redis_url, runtime):
    registry.register(runtime.client, [OrdersWorker])
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "pw",
                                 "LOWKIQ_WEB_USER": "ops"}).test_client()
    assert client.post(API + "/perform_all_now", headers=basic("ops", "wrong")).status_code == 401
    assert client.post(API + "/perform_all_now", headers=basic("mallory", "pw")).status_code == 401
    assert audit.read(runtime.client) == []
    assert client.post(API + "/perform_all_now", headers=basic("ops", "pw")).status_code == 200
    assert {e.who for e in audit.read(runtime.client)} == {"ops"}


# ---- one entry ----------------------------------------------------------------------------


def test_thirty_calls_naming_a_hundred_long_ids_stay_small(client, runtime, r):
    make_dead(runtime, OrdersWorker, [{"id": "a"}])
    long_ids = [f"{i:03d}-" + "x" * 1020 for i in range(100)]  # 100 ids of 1 KB: 100 KB named per call
    before = used_memory(r)
    for _ in range(30):
        reply = client.post("/lowkiq" + API + "/morgue/delete", data=json.dumps({"ids": long_ids}),
                            content_type="application/json")
        assert reply.get_json() == {"count": 0}
    grown = used_memory(r) - before
    assert grown < 2 * 1024 * 1024, f"used_memory grew by {grown:,} bytes"
    entries = stored(r)
    assert len(entries) == 30 and max(map(len, entries)) <= 16 * 1024
    newest = audit.read(runtime.client, 1)[0]
    assert newest.ids_total == 100 and 0 < len(newest.ids) < 100
    assert newest.ids[0] == "000-" + "x" * (audit.ID_CHARS - 5) + audit.CUT
    page = client.get("/lowkiq/audit")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert f"… and {100 - len(newest.ids)} more ids not listed" in text
    assert "x" * audit.ID_CHARS not in text


def test_every_field_is_clipped_and_any_text_is_stored(runtime, r):
    awkward = "\x1b\x00\ud800<é>" * 5000  # 6-byte JSON escapes, a lone surrogate, multi-byte text
    audit.record(runtime.client, who=awkward, source=awkward, action=awkward, worker=awkward, count=7,
                 ids=[awkward] * 500, scope=awkward)
    [raw] = stored(r)
    assert len(raw) < 16 * 1024
    [entry] = audit.read(runtime.client)
    assert entry.count == 7 and entry.ids_total == 500 and 0 < len(entry.ids) < 500
    for value, chars in ((entry.who, 200), (entry.source, 20), (entry.action, 100), (entry.worker, 200),
                         (entry.scope, 500), (entry.ids[0], audit.ID_CHARS)):
        assert len(value) == chars and value.endswith(audit.CUT)
    assert entry.who.startswith("\x1b\x00\\ud800<é>")


def test_short_entries_are_kept_whole(runtime):
    audit.record(runtime.client, who="alice", source="cli", action="morgue/requeue", worker="OrdersWorker",
                 count=2, ids=["1", "2"], scope="")
    [entry] = audit.read(runtime.client)
    assert (entry.who, entry.ids, entry.ids_total) == ("alice", ["1", "2"], 2)


def test_the_script_refuses_an_entry_over_the_limit(runtime, r):
    import redis

    with pytest.raises(redis.ResponseError, match="audit entry of 20000 bytes refused"):
        lua.run(runtime.client, "audit", audit.AUDIT_KEYS, ("x" * 20_000, audit.AUDIT_KEEP, audit.AUDIT_BYTES,
                                                            audit.ENTRY_BYTES))
    assert stored(r) == []


# ---- the list -----------------------------------------------------------------------------


def big(runtime, n: int) -> None:
    audit.record(runtime.client, who="bot", source="cli", action="morgue/delete", worker="W", count=n,
                 ids=[f"{n}-{i}-" + "y" * 180 for i in range(100)])


def test_the_list_is_trimmed_by_bytes_oldest_first(runtime, r, monkeypatch):
    monkeypatch.setattr(audit, "AUDIT_BYTES", 100_000)
    for n in range(40):  # about 8 KB each: 320 KB written
        big(runtime, n)
    usage = r.memory_usage(audit.AUDIT_KEYS.audit_list, samples=0)
    assert usage <= 100_000
    counts = [e.count for e in audit.read(runtime.client, 100)]
    assert 5 < len(counts) < 40 and counts == list(range(39, 39 - len(counts), -1))  # the newest, in order


def test_an_oversized_entry_written_elsewhere_goes_at_the_next_record(runtime, r, monkeypatch):
    monkeypatch.setattr(audit, "AUDIT_BYTES", 100_000)
    r.lpush(audit.AUDIT_KEYS.audit_list, "1 " + json.dumps({"who": "old", "ids": ["z" * 1000] * 300}))
    big(runtime, 1)
    assert [e.count for e in audit.read(runtime.client)] == [1]
    assert r.memory_usage(audit.AUDIT_KEYS.audit_list, samples=0) <= 100_000


def test_one_record_does_bounded_work_however_far_over_the_list_is(runtime, r, monkeypatch):
    key = audit.AUDIT_KEYS.audit_list
    r.rpush(key, *[f"{i} {{}}" for i in range(3000)])
    monkeypatch.setattr(audit, "AUDIT_BYTES", 1)  # everything but the new entry is over
    audit.record(runtime.client, who="bot", source="cli", action="a", worker="W", count=1)
    assert r.llen(key) == 3001 - 1000  # MAX_POPS of the oldest per call
    audit.record(runtime.client, who="bot", source="cli", action="a", worker="W", count=2)
    assert r.llen(key) == 3002 - 2000
    audit.record(runtime.client, who="bot", source="cli", action="a", worker="W", count=3)
    audit.record(runtime.client, who="bot", source="cli", action="a", worker="W", count=4)
    assert [e.count for e in audit.read(runtime.client)] == [4]  # never the entry just written
