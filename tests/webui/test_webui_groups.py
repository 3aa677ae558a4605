"""Depth and lag per group in the console (docs/fairness.md, "Depth and lag per group"): api/v1/stats, the worker
page's Groups table and Prometheus, for workers with grouped ids only, bounded to the 20 biggest and "(other)"."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families
from queue_support import RoundTrips
from webui_support import MailerWorker, OrdersWorker

API = "/lowkiq/api/v1"


def enqueue_tenants(clock) -> None:
    # t<i> holds i + 1 ids, its oldest due 10 + i seconds ago; 22 tenants: t00 and t01 end up in "(other)"
    OrdersWorker.perform_async([{"id": f"t{i}-{k}", "group": f"t{i:02}", "perform_in": clock() - 10 - i + k}
                                for i in range(22) for k in range(i + 1)])
    OrdersWorker.perform_async([{"id": "plain", "perform_in": clock() - 1000}])  # the default group: not shown


def test_stats_show_the_groups_of_grouped_workers_only(client, runtime, clock, monkeypatch):
    enqueue_tenants(clock)
    MailerWorker.perform_async([{"id": "m", "perform_in": clock() - 5}])
    data = client.get(API + "/stats").get_json()
    groups = data["by_worker"]["OrdersWorker"]["groups"]
    assert list(groups) == [f"t{i:02}" for i in range(21, 1, -1)] + ["(other)"]
    assert groups["t21"] == {"length": 22, "lag": 31.0} and groups["t02"] == {"length": 3, "lag": 12.0}
    assert groups["(other)"] == {"length": 1 + 2, "lag": 11.0}
    assert sum(g["length"] for g in groups.values()) == data["by_worker"]["OrdersWorker"]["length"] - 1
    # SPEC's shape elsewhere: no groups key for a worker without groups, nor in total
    assert data["by_worker"]["MailerWorker"] == {"length": 1, "morgue_length": 0, "lag": 5.0}
    assert set(data["total"]) == {"length", "morgue_length", "lag"}
    trips = RoundTrips(monkeypatch)
    client.get(API + "/stats")
    assert trips.count == 2  # the groups' own reads: one more round trip, for every grouped worker at once


def test_the_worker_page_shows_a_groups_table_with_escaped_names(client, runtime, clock):
    OrdersWorker.perform_async([{"id": "x", "group": "<b>acme</b>", "perform_in": clock() - 90},
                                {"id": "y", "group": "<b>acme</b>"}, {"id": "z", "group": "zeta"}])
    page = client.get("/lowkiq/workers/OrdersWorker/_counts?tab=enqueued").get_data(as_text=True)
    table = page[page.index('id="groups"'):page.index("</table>", page.index('id="groups"'))]
    assert "&lt;b&gt;acme&lt;/b&gt;" in table and "<b>acme" not in table
    rows = re.findall(r"<tr><td>(.*?)</td>\s*<td class=\"num\" data-group-length>(\d+)</td><td class=\"num\">(.*?)</td>",
                      table, re.S)
    # acme's oldest is 90 s overdue; zeta's job is due at Redis's now, later than the console's clock
    assert [(re.sub("<[^>]+>", "", name), n, lag) for name, n, lag in rows] == [
        ("&lt;b&gt;acme&lt;/b&gt;", "2", "1 min"), ("zeta", "1", "0.0 s")]
    plain = client.get("/lowkiq/workers/MailerWorker/_counts?tab=enqueued").get_data(as_text=True)
    assert 'id="groups"' not in plain and 'id="worker-groups"' in plain  # emptied, for a worker without groups


def test_prometheus_has_bounded_group_series(client, runtime, clock):
    enqueue_tenants(clock)
    families = {f.name: f for f in text_string_to_metric_families(client.get("/lowkiq/metrics").get_data(as_text=True))}
    lengths = {s.labels["group"]: s.value for s in families["lowkiq_group_length"].samples}
    lags = {s.labels["group"]: s.value for s in families["lowkiq_group_lag_seconds"].samples}
    assert len(lengths) == 21 and lengths["(other)"] == 3 and lengths["t21"] == 22
    assert lags["t21"] == 31.0 and lags["(other)"] == 11.0
    assert {s.labels["worker"] for s in families["lowkiq_group_length"].samples} == {"OrdersWorker"}
    assert all(s.labels["queue"] == OrdersWorker.queue_name for s in families["lowkiq_group_lag_seconds"].samples)
