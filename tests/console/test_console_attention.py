"""The dashboard's "needs attention" band against a real redis-server: each item shows when its condition holds
(a stall, a perform over its time limit, held whole_id ids, a schedule that missed a tick or whose last run
failed, a group waiting far longer than the others, a growing morgue), names what it is about, escaped, and
links to the page that acts on it; a calm system shows no band at all."""

from __future__ import annotations

import time
from typing import Any

import pytest
from attention_support import Holder, Limited, perform_for, retake_at
from test_console_stalls import sample
from webui_support import XSS, OrdersWorker, fail, host_app, make_dead

import lowkiq
from lowkiq.serializers import dump_json
from lowkiq.store import lua, schedules
from lowkiq.store.minute_totals import MinuteTotalsKeys


class Tenants(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id: Any) -> None:
        pass


SYNC = lowkiq.Schedule("sync", OrdersWorker, every=30, id="sync-id")


@pytest.fixture
def runtime(configure):
    runtime = configure(workers=[OrdersWorker, Limited, Holder, Tenants], schedules=[SYNC])
    runtime.clock = time.time  # lags and the history's samples are Redis time
    return runtime


def band(html: str) -> str:
    if 'id="attention"' not in html:
        return ""
    start = html.index('id="attention"')
    return html[start:html.index("</section>", start)]


def item(html: str, kind: str) -> str:
    found = band(html)
    marker = f'data-attention="{kind}"'
    if marker not in found:
        return ""
    start = found.index(marker)
    return found[start:found.index("</div>", start)]


def live() -> str:
    return host_app().test_client().get("/lowkiq/_live").get_data(as_text=True)


def test_a_calm_system_shows_no_band(runtime, r):
    OrdersWorker.perform_async([{"id": "fresh", "payload": 1}])
    Tenants.perform_async([{"id": f"t{i}", "group": g, "payload": 1} for i, g in enumerate("ABC")])
    lua.run(r, *schedules.tick_call(SYNC, [SYNC.next_after(time.time()) - 30], 0.0, dump_json))  # ticked on time
    sample(r, OrdersWorker.queue_name, 120, 0)
    html = live()
    assert band(html) == "" and "Needs attention" not in html


def test_a_perform_over_its_time_limit_is_named_with_its_shard(runtime, r):
    shard = perform_for(runtime, Limited, "slow", 95, thread="lowkiq-7")
    found = item(live(), "over_limit")
    assert f'href="/lowkiq/workers/Limited/busy">Limited shard {shard}</a>' in found
    assert "performing for 1 min" in found and "(limit 30 s)" in found and "(lowkiq-7)" in found
    retake_at(runtime, Limited, shard, 5)  # within its limit: not named
    assert item(live(), "over_limit") == ""


def test_held_ids_of_a_whole_id_worker_link_to_its_morgue(runtime, r):
    make_dead(runtime, Holder, [{"id": "h1"}, {"id": "h2"}])
    found = item(live(), "held")
    assert '<a href="/lowkiq/workers/Holder/morgue">Holder</a> holds 2 ids' in found
    make_dead(runtime, OrdersWorker, [{"id": "o1"}])  # another policy's dead jobs hold nothing
    assert "OrdersWorker" not in item(live(), "held")


def test_a_schedule_that_missed_a_tick_or_whose_run_failed_is_named(runtime, r):
    old = SYNC.next_after(time.time() - 600)
    lua.run(r, *schedules.tick_call(SYNC, [old], 0.0, dump_json))  # the last tick dealt with: ten minutes ago
    found = item(live(), "schedule")
    assert 'data-schedule-name="sync">sync</a> missed its tick due' in found
    assert 'href="/lowkiq/schedules"' in found
    make_dead(runtime, OrdersWorker, [{"id": "sync-id"}])  # its run died
    found = item(live(), "schedule")
    assert "its last run failed" in found and 'href="/lowkiq/workers/OrdersWorker/job?id=sync-id">in the morgue</a>' \
        in found


def test_a_group_waiting_far_longer_than_the_others_is_named_escaped(runtime, r):
    now = time.time()
    Tenants.perform_async([{"id": f"hog-{i}", "group": XSS, "payload": 1, "perform_in": now - 600} for i in range(5)])
    Tenants.perform_async([{"id": f"b{i}", "group": g, "payload": 1, "perform_in": now - 3}
                           for i, g in enumerate("BCD")])
    html = live()
    found = item(html, "group")
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;</a> of Tenants waits 10 min" in found
    assert "5 ids queued" in found and 'href="/lowkiq/workers/Tenants/enqueued#worker-groups"' in found
    for g in "BCD":
        assert f'data-group="{g}"' not in found


def test_every_group_waiting_alike_names_none(runtime, r):
    now = time.time()
    Tenants.perform_async([{"id": f"t{i}", "group": g, "payload": 1, "perform_in": now - 900}
                           for i, g in enumerate("ABCD")])
    assert item(live(), "group") == ""


def test_a_growing_morgue_is_named_with_what_it_gained(runtime, r):
    at_ms = int((time.time() - 300) * 1000)
    r.xadd(MinuteTotalsKeys.stream(OrdersWorker.queue_name),
           {"at": at_ms, "processed": 0, "failed": 0, "lag": 0, "length": 0, "dead": 1}, id=f"{at_ms - at_ms % 60000}-0")
    make_dead(runtime, OrdersWorker, [{"id": f"d{i}"} for i in range(4)])
    found = item(live(), "morgue")
    assert '<a href="/lowkiq/workers/OrdersWorker/morgue">OrdersWorker</a> +3 dead in 5 min (4 in all)' in found


def test_a_stall_is_part_of_the_band(runtime, r):
    OrdersWorker.perform_async([{"id": f"due-{i}", "payload": i, "perform_in": time.time() - 150} for i in range(3)])
    sample(r, OrdersWorker.queue_name, 120, 0)
    html = live()
    assert 'id="stalled"' in band(html) and "OrdersWorker</a> has jobs due for" in item(html, "stall")
    assert html.index('id="attention"') < html.index('id="workers"') < html.index('id="redis-panel"')


def test_an_id_waiting_on_a_dead_dependency_is_named_with_both_links(runtime, r):
    dependency = "<b>c1</b>"
    OrdersWorker.perform_async([{"id": dependency, "payload": "create"}, {"id": "c2", "payload": 1}])
    Holder.perform_async([{"id": "h-wait", "payload": 1, "after": [{"worker": "OrdersWorker", "id": dependency}]}])
    assert item(live(), "dependency") == ""  # its dependency is queued: nothing to act on
    fail(runtime, OrdersWorker, [dependency])
    runtime.actions(OrdersWorker).kill_failed()
    html = live()
    found = item(html, "dependency")
    assert dependency not in html
    assert '<a href="/lowkiq/workers/Holder/job?id=h-wait">h-wait</a> of Holder waits on' in found
    assert 'href="/lowkiq/workers/OrdersWorker/job?id=%3Cb%3Ec1%3C/b%3E">&lt;b&gt;c1&lt;/b&gt;</a>, dead in OrdersWorker' \
        in found


def test_the_dashboard_api_answers_the_band_as_documented(runtime, r):
    from openapi_support import Spec

    make_dead(runtime, Holder, [{"id": "h1"}])
    lua.run(r, *schedules.tick_call(SYNC, [SYNC.next_after(time.time() - 600)], 0.0, dump_json))
    perform_for(runtime, Limited, "slow", 95)
    Tenants.perform_async([{"id": f"t{g}", "group": g, "payload": 1, "perform_in": time.time() - (900 if g == "A"
                           else 1)} for g in "ABC"])
    client = host_app().test_client()
    reply = client.get("/lowkiq/api/v1/dashboard")
    data = Spec(client.get("/lowkiq/api/v1/openapi.json").get_json()).check(reply, "/api/v1/dashboard")
    band = data["attention"]
    assert band["held"] == [{"worker": "Holder", "ids": 1}] and band["stalled"] == []
    assert [o["worker"] for o in band["over_limit"]] == ["Limited"] and band["over_limit"][0]["limit"] == 30
    assert [t["name"] for t in band["schedules"]] == ["sync"] and [g["group"] for g in band["slow_groups"]] == ["A"]
