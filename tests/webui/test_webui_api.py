"""The JSON API under the console's prefix."""

from __future__ import annotations

import json

import pytest
from queue_support import RoundTrips, held_lease
from webui_support import MailerWorker, OrdersWorker, counts, fail, make_dead

API = "/lowkiq/api/v1"
W = API + "/workers/OrdersWorker"


def post(client, path, body=None, raw=None, content_type="application/json"):
    data = raw if raw is not None else (json.dumps(body) if body is not None else "")
    return client.post(path, data=data, content_type=content_type)


def test_stats_exactly_as_spec(client, runtime, clock):
    make_dead(runtime, MailerWorker, [{"id": "dead"}])
    OrdersWorker.perform_async([{"id": 1, "perform_in": clock() - 30}, {"id": 2, "perform_in": clock() + 60}])
    MailerWorker.perform_async([{"id": "m", "perform_in": clock() - 5}])
    reply = client.get(API + "/stats")
    assert reply.status_code == 200 and reply.mimetype == "application/json"
    assert reply.headers["Cache-Control"] == "no-store"
    data = reply.get_json()
    assert data == {
        "total": {"length": 3, "morgue_length": 1, "lag": 30.0},
        "by_worker": {
            "OrdersWorker": {"length": 2, "morgue_length": 0, "lag": 30.0},
            "MailerWorker": {"length": 1, "morgue_length": 1, "lag": 5.0},
        },
    }
    assert isinstance(data["total"]["lag"], float)


def test_stats_of_an_empty_redis(client):
    assert client.get(API + "/stats").get_json() == {
        "total": {"length": 0, "morgue_length": 0, "lag": 0.0},
        "by_worker": {
            "OrdersWorker": {"length": 0, "morgue_length": 0, "lag": 0.0},
            "MailerWorker": {"length": 0, "morgue_length": 0, "lag": 0.0},
        },
    }


def test_stats_is_one_round_trip(client, monkeypatch):
    client.get(API + "/stats")  # scripts loaded, pool warm
    trips = RoundTrips(monkeypatch)
    client.get(API + "/stats")
    assert trips.count == 1


def test_morgue_page_is_two_round_trips(client, runtime, monkeypatch):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(150)])
    client.get("/lowkiq/workers/OrdersWorker/morgue?limit=100")
    trips = RoundTrips(monkeypatch)
    page = client.get("/lowkiq/workers/OrdersWorker/morgue?limit=100&order_by=id")
    assert page.status_code == 200
    assert trips.count == 2


def test_dashboard(client, runtime):
    OrdersWorker.perform_async([{"id": 1}])
    fail(runtime, OrdersWorker, ["1"])
    OrdersWorker.perform_async([{"id": 2}, {"id": 3}])
    q = runtime.queue(OrdersWorker)
    taken = q.ack_and_take(None, (held_lease(q, q.shard_of("3")), 1))
    q.ack_and_take((held_lease(q, q.shard_of("3")), [j.id for j in taken.jobs]), None)
    data = client.get(API + "/dashboard").get_json()
    orders = next(q for q in data["queues"] if q["name"] == "OrdersWorker")
    assert orders == {
        "name": "OrdersWorker", "queue_name": "OrdersWorker", "shards_count": 4, "lag": 0.0,
        "processed": 1, "dropped": 0, "failed": 1, "busy": 0, "enqueued": 2, "fresh": 1, "retries": 1, "dead": 0,
        "held": 0, "paused": None, "measured": True,
    }
    assert data["totals"]["enqueued"] == 2
    assert data["redis_info"]["version"] == runtime.client.info()["redis_version"]
    assert {"uptime_in_seconds", "connected_clients", "used_memory", "used_memory_peak"} <= set(data["redis_info"])


def test_enqueued_list_with_params_and_cursors(client, clock):
    OrdersWorker.perform_async([{"id": f"k{i}", "payload": {"i": i}, "score": 10.0 + i} for i in range(5)])
    data = client.get(W + "/enqueued?order_by=id&desc=1&limit=2").get_json()
    assert [j["id"] for j in data["jobs"]] == ["k4", "k3"]
    job = data["jobs"][0]
    assert job == {"id": "k4", "payloads": [[{"i": 4}, 14.0]], "perform_in": clock(), "retry_count": -1, "error": None}
    assert data["previous"] is None and data["next"]
    more = client.get(W + f"/enqueued?order_by=id&desc=1&limit=2&after={data['next']}").get_json()
    assert [j["id"] for j in more["jobs"]] == ["k2", "k1"]
    back = client.get(W + f"/enqueued?order_by=id&desc=1&limit=2&before={more['previous']}").get_json()
    assert [j["id"] for j in back["jobs"]] == ["k4", "k3"]
    assert [j["id"] for j in client.get(W + "/enqueued?order_by=id&min=k1&max=k2").get_json()["jobs"]] == ["k1", "k2"]


def test_morgue_list(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": "a", "payload": "p"}], error=b"bad thing")
    data = client.get(W + "/morgue?order_by=id").get_json()
    assert data["jobs"] == [{"id": "a", "payloads": [["p", clock()]], "updated_at": clock(), "error": "bad thing"}]
    assert client.get(W + "/morgue?order_by=updated_at&desc=1").get_json()["jobs"][0]["id"] == "a"


def test_busy_list(client, runtime):
    OrdersWorker.perform_async([{"id": "b"}])
    q = runtime.queue(OrdersWorker)
    q.ack_and_take(None, (held_lease(q, q.shard_of("b")), 5))
    assert [j["id"] for j in client.get(W + "/busy").get_json()["jobs"]] == ["b"]


def test_job(client, runtime):
    OrdersWorker.perform_async([{"id": "x/1", "payload": 1}])
    data = client.get(W + "/jobs/x/1").get_json()
    assert data["queued"]["payloads"][0][0] == 1 and data["busy"] is None and data["morgue"] is None
    missing = client.get(W + "/jobs/none")
    assert missing.status_code == 404 and "no job 'none'" in missing.get_json()["error"]


def test_requeue_and_delete_by_ids(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(4)])
    reply = post(client, W + "/morgue/requeue", {"ids": ["0", 1, "missing"]})
    assert reply.status_code == 200 and reply.get_json() == {"count": 2}
    assert reply.headers["Cache-Control"] == "no-store"
    assert post(client, W + "/morgue/delete", {"ids": ["2"]}).get_json() == {"count": 1}
    assert counts(runtime, OrdersWorker) == (2, 1)
    assert post(client, W + "/enqueued/delete", {"ids": ["0"]}).get_json() == {"count": 1}


@pytest.mark.parametrize(
    "path,expected",
    [("morgue/requeue_all", (3, 0)), ("morgue/delete_all", (1, 0)), ("kill_failed", (0, 3)),
     ("delete_failed", (0, 2)), ("perform_all_now", (1, 2))],
)
def test_bulk_actions_answer_their_count(client, runtime, clock, path, expected):
    make_dead(runtime, OrdersWorker, [{"id": "d1"}, {"id": "d2"}])
    OrdersWorker.perform_async([{"id": "f", "perform_in": clock() + 600}])
    clock.advance(601)
    fail(runtime, OrdersWorker, ["f"])  # f: retry_count 0, perform_in in the future
    clock.advance(-601)
    before = counts(runtime, OrdersWorker)
    reply = post(client, f"{W}/{path}")
    after = counts(runtime, OrdersWorker)
    assert reply.status_code == 200 and after == expected, (before, after)
    touched = {"morgue/requeue_all": 2, "morgue/delete_all": 2, "kill_failed": 1, "delete_failed": 1, "perform_all_now": 1}
    assert reply.get_json() == {"count": touched[path]}


def test_unknown_worker_is_404_json(client):
    for reply in (client.get(API + "/workers/Ghost/enqueued"), client.get(API + "/workers/Ghost/busy"),
                  post(client, API + "/workers/Ghost/morgue/requeue_all")):
        assert reply.status_code == 404
        assert reply.get_json() == {"error": "unknown worker 'Ghost'"}


@pytest.mark.parametrize(
    "raw,words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"ids": "1"}', '"ids" must be a list'),
        ('{"ids": [true]}', '"ids"[0] must be a non-empty string or an integer'),
        ('{"ids": [""]}', '"ids"[0]'),
        ('{"ids": ["1"], "all": 1}', "unknown fields ['all']"),
        ("", 'like {"ids"'),
    ],
)
def test_malformed_body_is_400_saying_what_is_wrong(client, raw, words):
    reply = post(client, W + "/morgue/requeue", raw=raw)
    assert reply.status_code == 400
    assert words in reply.get_json()["error"]


def test_bulk_action_refuses_parameters(client):
    reply = post(client, W + "/morgue/delete_all", {"ids": ["1"]})
    assert reply.status_code == 400 and "takes no parameters" in reply.get_json()["error"]


def test_bad_query_is_400_json(client):
    reply = client.get(W + "/morgue?order_by=perform_in")
    assert reply.status_code == 400 and "order_by must be one of id, updated_at" in reply.get_json()["error"]
    assert client.get(W + "/enqueued?limit=5000").status_code == 400


def test_posts_need_a_json_content_type(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
        reply = client.post(W + "/morgue/delete_all", data="x=1", content_type=content_type)
        assert reply.status_code == 415, content_type
        assert "application/json" in reply.get_json()["error"]
    assert counts(runtime, OrdersWorker) == (0, 1)


def test_job_lookup_by_query_takes_any_id(client, runtime):
    OrdersWorker.perform_async([{"id": "a/../b", "payload": "x"}])
    data = client.get(W + "/job", query_string={"id": "a/../b"}).get_json()
    assert data["id"] == "a/../b" and data["queued"]["payloads"] == [["x", data["queued"]["payloads"][0][1]]]
    assert client.get(W + "/job").status_code == 400
    assert client.get(W + "/job?id=nope").status_code == 404


def test_retry_now_makes_exactly_that_queued_job_due_and_is_audited(client, runtime, clock):
    later = clock() + 3600
    OrdersWorker.perform_async([{"id": i, "perform_in": later} for i in ("a", "c", "b/../a")] + [{"id": "r"}])
    fail(runtime, OrdersWorker, ["r"])  # its retry in a minute
    q = runtime.queries(OrdersWorker)
    assert q.job("r").retry_count == 0 and q.job("r").perform_in == clock() + 60
    clock.advance(1)
    reply = post(client, W + "/enqueued/retry_now", {"id": "r"})
    assert reply.status_code == 200 and reply.get_json() == {"count": 1}
    assert reply.headers["Cache-Control"] == "no-store"
    assert q.job("r").perform_in == clock() and q.job("r").retry_count == 0  # due now, still a retry
    assert post(client, W + "/enqueued/retry_now", {"id": "b/../a"}).get_json() == {"count": 1}
    assert [q.job(i).perform_in for i in ("a", "c")] == [later, later]
    assert q.job("b/../a").perform_in == clock()
    again = post(client, W + "/enqueued/retry_now", {"id": "r"})  # already due: nothing to change
    assert again.status_code == 200 and again.get_json() == {"count": 0}
    from lowkiq.store import audit

    assert [(e.action, e.worker, e.ids, e.count, e.source) for e in audit.read(runtime.client, 10)] == [
        ("enqueued/perform_now", "OrdersWorker", ["r"], 0, "api"),
        ("enqueued/perform_now", "OrdersWorker", ["b/../a"], 1, "api"),
        ("enqueued/perform_now", "OrdersWorker", ["r"], 1, "api")]


def test_retry_now_takes_an_integer_id(client, runtime, clock):
    OrdersWorker.perform_async([{"id": 7, "perform_in": clock() + 60}])
    assert post(client, W + "/enqueued/retry_now", {"id": 7}).get_json() == {"count": 1}
    assert runtime.queries(OrdersWorker).job("7").perform_in == clock()


def test_retry_now_of_an_id_not_queued_is_a_404_that_touches_and_records_nothing(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": "dead"}])
    OrdersWorker.perform_async([{"id": "busy", "perform_in": clock()}])
    q = runtime.queue(OrdersWorker)
    assert [j.id for j in q.ack_and_take(None, (held_lease(q, q.shard_of("busy")), 5)).jobs] == ["busy"]
    for job_id in ("missing", "dead", "busy"):
        reply = post(client, W + "/enqueued/retry_now", {"id": job_id})
        assert reply.status_code == 404 and reply.get_json() == {"error": f"no queued job {job_id!r} in OrdersWorker"}
    from lowkiq.store import audit

    assert audit.read(runtime.client, 10) == []
    assert runtime.queries(OrdersWorker).morgue_job("dead") is not None
    ghost = post(client, API + "/workers/Ghost/enqueued/retry_now", {"id": "dead"})
    assert ghost.status_code == 404 and ghost.get_json() == {"error": "unknown worker 'Ghost'"}


@pytest.mark.parametrize(
    "raw,words",
    [
        ("", 'like {"id"'),
        ("{}", 'needs "id"'),
        ('{"ids": ["a"]}', "unknown fields ['ids']"),
        ('{"id": ""}', '"id" must be a non-empty string or an integer'),
        ('{"id": true}', '"id" must be a non-empty string or an integer'),
        ('{"id": ["a"]}', '"id" must be a non-empty string or an integer'),
    ],
)
def test_retry_now_says_what_is_wrong_with_its_body(client, runtime, clock, raw, words):
    OrdersWorker.perform_async([{"id": "a", "perform_in": clock() + 60}])
    reply = post(client, W + "/enqueued/retry_now", raw=raw)
    assert reply.status_code == 400 and words in reply.get_json()["error"]
    assert runtime.queries(OrdersWorker).job("a").perform_in == clock() + 60


def test_retry_now_is_refused_cross_site_and_without_json(client, runtime, clock):
    OrdersWorker.perform_async([{"id": "a", "perform_in": clock() + 60}])
    form = client.post(W + "/enqueued/retry_now", data="id=a", content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415  # what a cross-site form can send
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://elsewhere.example"}):
        refused = client.post(W + "/enqueued/retry_now", data='{"id": "a"}', content_type="application/json",
                              headers=headers)
        assert refused.status_code == 403, headers
    assert runtime.queries(OrdersWorker).job("a").perform_in == clock() + 60
    from lowkiq.store import audit

    assert audit.read(runtime.client, 10) == []
