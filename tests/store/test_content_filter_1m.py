"""Content filters stay cheap on a million dead jobs in one shard: no lowkiq script shows in SLOWLOG over 50 ms,
neither for a filtered page nor for a dry run that searches them all, and a page answers within a second."""

from __future__ import annotations

import time
from typing import Any

import pytest
from webui_support import host_app

import lowkiq

pytestmark = pytest.mark.slow

JOBS = 1_000_000
SLOW_US = 50_000
API = "/lowkiq/api/v1/workers/Huge"

# Writes dead jobs as the morgue keeps them (morgue_put's layout): one EVAL per slice of ids, so that seeding a
# million takes seconds. Every thousandth died of a TimeoutError, the others of a KeyError.
SEED = """
local first, last, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = first, last do
  local id = string.format('j%07d', i)
  redis.call('ZADD', KEYS[1], 0, id)
  redis.call('ZADD', KEYS[2], now + i / 1000, id)
  redis.call('HSET', KEYS[3], id, cmsgpack.pack({'{"order":' .. i .. ',"to":"user' .. i .. '@example.com"}', now}))
  local err = 'KeyError: \\'card\\''
  if i % 1000 == 0 then err = 'TimeoutError: mailbox did not answer' end
  redis.call('HSET', KEYS[4], id, err)
end
"""


class Huge(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id: Any) -> None:
        pass


def slow_scripts(r) -> list[tuple[int, str]]:
    return [(e["duration"], str(e["command"])[:60]) for e in r.slowlog_get(128)
            if str(e["command"]).upper().startswith(("EVALSHA", "EVAL ", "FCALL", "B'EVALSHA"))]


@pytest.fixture
def huge(configure, r):
    rt = configure(workers=[Huge])
    shard = rt.queue(Huge).keys.shards()[0]
    keys = [shard.morgue_ids_lex_zset, shard.morgue_ids_by_updated_at_zset, shard.morgue_payloads_hash,
            shard.morgue_errors_hash]
    seed = r.register_script(SEED)
    for start in range(0, JOBS, 100_000):
        seed(keys=keys, args=[start, start + 99_999, 1_700_000_000])
    assert r.zcard(shard.morgue_ids_lex_zset) == JOBS
    r.config_set("slowlog-log-slower-than", SLOW_US)
    r.slowlog_reset()
    yield rt
    r.config_set("slowlog-log-slower-than", 10_000)


def test_a_filtered_page_and_a_dry_run_on_a_million_dead_jobs(huge, r):
    client = host_app().test_client()
    for query in ({"error": "mailbox", "limit": "100"}, {"payload": "nowhere-at-all"},
                  {"error_class": "TimeoutError", "payload": "user5000@"}):
        started = time.monotonic()
        page = client.get(API + "/morgue", query_string=query)
        took = time.monotonic() - started
        assert page.status_code == 200, page.json
        assert took < 1.0, (query, took)
        scan = page.json["scan"]
        assert scan["total"] == JOBS and 0 < scan["examined"] < JOBS and scan["continue"]
    assert slow_scripts(r) == [], "a lowkiq script held Redis over 50 ms for a page"
    # The page over the rare error stopped at its budget of examined ids, with what it found so far.
    rare = client.get(API + "/morgue", query_string={"error_class": "TimeoutError", "limit": "100"}).json
    assert len(rare["jobs"]) == rare["scan"]["examined"] // 1000
    dry = client.post(API + "/morgue/matching", json={"action": "delete", "error": "mailbox", "dry_run": True})
    assert dry.status_code == 200 and dry.json["count"] == JOBS // 1000
    assert slow_scripts(r) == [], "a lowkiq script held Redis over 50 ms for a dry run"
