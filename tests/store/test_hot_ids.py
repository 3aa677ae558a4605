"""Hot ids per worker against a real redis-server: the ids with the most versions enqueued, retries and perform
time over the last hour, from each shard's history stream, read within a bound the answer states; each shard's
lag with its oldest due id. In the console (a tab), the JSON API (GET api/v1/workers/<w>/hot) and the CLI."""

from __future__ import annotations

import json
import random
import time

import pytest
from queue_support import held_lease
from server_support import run_cli
from webui_support import XSS, host_app

import lowkiq
from lowkiq.console import hot
from lowkiq.store import hot_ids


class Busy(lowkiq.Worker):
    shards_count = 4

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def runtime(configure):
    runtime = configure(workers=[Busy])
    runtime.clock = time.time  # history entries are stamped with Redis time
    return runtime


def crowd(hot_id: str = "order-hot") -> None:
    """10,000 ids of 1 to 3 versions, and ``hot_id`` with 1,000 versions among them, 10 per push."""
    rng = random.Random(7)
    jobs = [{"id": f"order-{i:05}", "payload": v} for i in range(10_000) for v in range(rng.randint(1, 3))]
    for start in range(0, len(jobs), 2_000):
        Busy.perform_async(jobs[start:start + 2_000])
    for n in range(100):
        Busy.perform_async([{"id": hot_id, "payload": 10 * n + k} for k in range(10)])


def test_the_id_that_got_1000_versions_among_10000_ids_is_named_first(runtime):
    crowd()
    c = host_app().test_client()
    data = c.get("/lowkiq/api/v1/workers/Busy/hot").get_json()
    first = data["by_versions"][0]
    assert first["id"] == "order-hot" and first["versions"] == 1000
    assert all(row["versions"] <= 3 for row in data["by_versions"][1:])
    assert data["whole_window"] is True and data["ids_seen"] == 10_001
    assert data["budget"] == {"entries": hot.HOT_ENTRIES, "per_shard": hot.HOT_ENTRIES // 4}
    html = c.get("/lowkiq/workers/Busy/hot").get_data(as_text=True)
    table = html.split('id="hot-versions"')[1].split("</table>")[0]
    assert table.index("order-hot") < table.index("order-0")  # first in its table
    assert 'href="/lowkiq/workers/Busy/job?id=order-hot"' in table
    assert "entries of the history read" in html  # the bound is said on the page


def test_retries_and_perform_time_name_their_ids_and_shards_name_their_oldest_due_id(runtime, r):
    q = runtime.queue(Busy)
    shard = q.shard_of("slow")
    mates = [i for i in (f"m{n}" for n in range(50)) if q.shard_of(i) == shard][:2]
    Busy.perform_async([{"id": "slow", "payload": 1}, *({"id": m, "payload": 1} for m in mates)])
    lease = held_lease(q, shard)
    for _ in range(3):  # "slow" fails three times; its batch-mates are performed the first time
        taken = q.ack_and_take(None, (lease, 10))
        time.sleep(0.05)
        q.fail(lease, [("slow", time.time() - 1)], b"", 5, errors={"slow": b"Boom"},
               acked=[j.id for j in taken.jobs if j.id != "slow"])
    Busy.perform_async([{"id": "due-long", "payload": 1, "perform_in": time.time() - 120}])
    found = hot.hot_ids(host_console(runtime), host_console(runtime).worker("Busy"))
    assert [(h.id, h.retries) for h in found.by_retries] == [("slow", 3)]
    assert found.by_perform_time[0].id == "slow" and found.by_perform_time[0].perform_seconds >= 0.15
    head = found.heads[q.shard_of("due-long")]
    assert head.oldest_id == "due-long" and head.lag >= 119
    html = host_app().test_client().get("/lowkiq/workers/Busy/hot").get_data(as_text=True)
    lags = html.split('id="hot-shards"')[1].split("</table>")[0]
    assert 'href="/lowkiq/workers/Busy/job?id=due-long">due-long</a>' in lags


def host_console(runtime):
    from lowkiq.console import Console

    return Console.from_runtime(runtime, redis_timeout=5)


def test_a_shard_busier_than_its_budget_is_read_in_part_and_says_so(runtime, monkeypatch):
    for n in range(30):
        Busy.perform_async([{"id": "spam", "payload": n}])  # 30 entries in the shard of "spam"
    monkeypatch.setattr(hot, "HOT_ENTRIES", 4)
    monkeypatch.setattr(hot, "per_shard", lambda shards: 10)
    data = host_app().test_client().get("/lowkiq/api/v1/workers/Busy/hot").get_json()
    assert data["whole_window"] is False and data["by_versions"][0] == {
        "id": "spam", "shard": runtime.queue(Busy).shard_of("spam"), "versions": 10, "retries": 0,
        "perform_seconds": 0.0}
    html = host_app().test_client().get("/lowkiq/workers/Busy/hot").get_data(as_text=True)
    assert "reached its budget" in html


def test_hostile_ids_are_escaped_and_the_read_only_page_has_no_action(runtime):
    Busy.perform_async([{"id": XSS, "payload": 1}])
    html = host_app(LOWKIQ_WEB_READONLY=True).test_client().get("/lowkiq/workers/Busy/hot").get_data(as_text=True)
    assert XSS not in html and "&lt;script&gt;" in html and "<form method=\"post\"" not in html
    assert hot_ids.TOP == 10


@pytest.mark.slow
def test_the_cli_names_the_hot_id(tmp_path, redis_url, runtime):
    crowd("order-hot")
    out = run_cli(tmp_path, "jobs", "hot", "Busy", "--redis-url", redis_url)
    assert out.returncode == 0, out.stderr
    assert "order-hot" in out.stdout.split("most retries")[0] and "1,000" in out.stdout
    data = json.loads(run_cli(tmp_path, "jobs", "hot", "Busy", "--json", "--redis-url", redis_url).stdout)
    assert data["by_versions"][0]["id"] == "order-hot"
    missing = run_cli(tmp_path, "jobs", "hot", "Nope", "--redis-url", redis_url)
    assert missing.returncode == 2 and "no worker 'Nope'" in missing.stderr


def test_the_budget_holds_for_a_worker_of_many_shards():
    assert hot.per_shard(4096) * 4096 <= hot.HOT_ENTRIES and hot.per_shard(4096) >= 1
    assert hot.per_shard(1) == hot.HOT_ENTRIES
