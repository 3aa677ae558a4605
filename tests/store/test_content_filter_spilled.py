"""A content filter over one id holding 5,000 payloads of 10 KB (spilled, 50 MB) holds Redis in short steps: no
lowkiq script shows in SLOWLOG over 50 ms, neither for a filtered page nor for a dry run of a filtered bulk
action, with a 200-character needle that costs string.find the most (``aaa…ab`` over payloads of ``a``), and
what they find is exact."""

from __future__ import annotations

from typing import Any

import pytest
from webui_support import host_app

import lowkiq

pytestmark = pytest.mark.slow

PAYLOADS = 5_000
PAYLOAD_BYTES = 10_000
SLOW_US = 50_000
NEEDLE = "a" * 199 + "b"
API = "/lowkiq/api/v1/workers/Deep"


class Deep(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id: Any) -> None:
        pass


def slow_scripts(r) -> list[tuple[int, str]]:
    return [(e["duration"], str(e["command"])[:60]) for e in r.slowlog_get(128)
            if str(e["command"]).upper().startswith(("EVALSHA", "EVAL ", "FCALL", "B'EVALSHA"))]


def padded(i: int, tail: str = "") -> str:
    """A payload of PAYLOAD_BYTES as stored: its number, then runs of "a" that end as ``tail`` says."""
    head = f"{i:05d}:"
    return head + "a" * (PAYLOAD_BYTES - len(head) - len(tail)) + tail


@pytest.fixture
def deep(configure, r):
    rt = configure(workers=[Deep])
    # The needle is in the big id's last payload only (the whole id is read to find it), in two small ids, and
    # nearly in one: a "b" after 198 "a" is no match.
    for start in range(0, PAYLOADS, 500):
        Deep.perform_async([{"id": "big", "score": i,
                             "payload": padded(i, "b" if i == PAYLOADS - 1 else "")}
                            for i in range(start, start + 500)])
    Deep.perform_async([{"id": "hit-1", "payload": padded(1, "b")}, {"id": "hit-2", "payload": "x" + NEEDLE},
                        {"id": "near", "payload": "x" + NEEDLE[1:]}, {"id": "plain", "payload": "nothing"}])
    shard = rt.queue(Deep).keys.shards()[0]
    assert r.hget(shard.payloads_hash, "big")[:1] == b"\xc1"  # spilled
    assert r.zcard(shard.spilled_payloads_zset) == PAYLOADS
    r.config_set("slowlog-log-slower-than", SLOW_US)
    r.slowlog_reset()
    yield rt
    r.config_set("slowlog-log-slower-than", 10_000)


def test_a_filtered_page_and_a_dry_run_over_an_id_of_5000_payloads_of_10_kb(deep, r):
    client = host_app().test_client()
    found: list[str] = []
    query = {"payload": NEEDLE, "limit": "100"}
    pages = 0
    while True:
        page = client.get(API + "/enqueued", query_string=query)
        assert page.status_code == 200, page.json
        found += [job["id"] for job in page.json["jobs"]]
        pages += 1
        following = page.json["scan"]["continue"]
        if following is None:
            break
        query["scan"] = following
    assert slow_scripts(r) == [], "a lowkiq script held Redis over 50 ms for a page"
    assert sorted(found) == ["big", "hit-1", "hit-2"]
    assert pages > 1  # the big id alone is more than a page's work: the pages went on inside it

    dry = client.post(API + "/enqueued/matching", json={"action": "delete", "payload": NEEDLE, "dry_run": True})
    assert dry.status_code == 200, dry.json
    assert dry.json["count"] == 3
    assert slow_scripts(r) == [], "a lowkiq script held Redis over 50 ms for a dry run"
