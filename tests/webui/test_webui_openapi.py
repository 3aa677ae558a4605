"""The OpenAPI document of the JSON API: a valid OpenAPI 3.1 document, exactly the API's routes,
and schemas that the API's real answers (and errors) satisfy."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from openapi_spec_validator import validate
from openapi_support import DOC, PREFIX, Spec, url
from queue_support import held_lease
from test_webui_history import seed as seed_history
from webui_support import MailerWorker, OrdersWorker, fail, host_app, make_dead

import lowkiq
from lowkiq.console.listing import TIME_ORDERS
from lowkiq.console.operations import OPERATIONS
from lowkiq.store import lua, membership
from lowkiq.store.keys import registry_hash
from lowkiq.webui import create_app

QUERY_VALUES = {"id": "all3"}
# Flask adds these to every rule; the document lists the methods the routes were declared with.
IMPLICIT_METHODS = {"HEAD", "OPTIONS"}


def auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def flask_template(rule: str) -> str:
    """A Flask rule as an OpenAPI path template: ``<path:job_id>`` -> ``{job_id}``."""
    return re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", r"{\1}", rule)


@pytest.fixture
def spec(client) -> Spec:
    reply = client.get(PREFIX + DOC)
    assert reply.status_code == 200 and reply.mimetype == "application/json"
    return Spec(reply.get_json())


# ---- the document ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_document_is_valid_openapi_3_1(spec):
    validate(spec.doc)
    assert spec.doc["openapi"].startswith("3.1.")
    assert spec.doc["servers"][0]["url"] == PREFIX
    assert "security" not in spec.doc  # no password: the host app's authentication applies


def test_it_documents_exactly_the_api_routes(app, spec):
    routes = {
        (flask_template(rule.rule.removeprefix(PREFIX)), method, rule.endpoint.removeprefix("lowkiq."))
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith(PREFIX + "/api/v1/")
        for method in rule.methods - IMPLICIT_METHODS
    }
    documented = {
        (path, method.upper(), operation["operationId"])
        for path, item in spec.doc["paths"].items()
        for method, operation in item.items()
    }
    assert documented == routes
    # Every operation, and whether it takes ids, as the routes run them.
    for op in OPERATIONS:
        body = spec.operation(f"/api/v1/workers/{{worker}}/{op.path}", "post")["requestBody"]
        assert body["required"] is op.takes_ids


@pytest.mark.slow
def test_servers_is_the_prefix_the_request_came_through(runtime):
    behind_proxy = host_app("/ops").test_client()
    doc = behind_proxy.get("/ops" + DOC, base_url="http://localhost/proxy/").get_json()
    assert doc["servers"][0]["url"] == "/proxy/ops"
    at_root = host_app("/").test_client().get(DOC).get_json()
    assert at_root["servers"][0]["url"] == "/"
    validate(at_root)


@pytest.mark.slow
def test_standalone_with_a_password_requires_basic_auth(redis_url, runtime):
    c = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "s3cret",
                            "LOWKIQ_WEB_READONLY": "1"}).test_client()
    denied = c.get(DOC)
    assert denied.status_code == 401
    reply = c.get(DOC, headers=auth("admin", "s3cret"))  # read-only mode lets it through
    assert reply.status_code == 200
    spec = Spec(reply.get_json())
    validate(spec.doc)
    assert spec.doc["security"] == [{"basicAuth": []}]
    scheme = spec.doc["components"]["securitySchemes"]["basicAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "basic")
    assert spec.doc["servers"][0]["url"] == "/"
    spec.check(denied, DOC)
    assert denied.headers["WWW-Authenticate"].startswith("Basic realm=")
    # Unrouted: the standalone app answers JSON for the API; read-only refuses actions.
    spec.check_error(c.get("/api/v1/workers/OrdersWorker/perform_all_now", headers=auth("admin", "s3cret")),
                     "MethodNotAllowed")
    refused = c.post("/api/v1/workers/OrdersWorker/perform_all_now", data="{}", content_type="application/json",
                     headers=auth("admin", "s3cret"))
    assert refused.status_code == 403
    spec.check(refused, "/api/v1/workers/{worker}/perform_all_now", "post")


# ---- real answers ------------------------------------------------------------------------------


def beat(r: Any, member: str, shards: dict[str, list[int]]) -> None:
    """A server process's heartbeat, as `lowkiq -r` beats it."""
    record = membership.info(threads=2, version=lowkiq.__version__, state="running", started_ms=1,
                             queues=[("OrdersWorker", 4), ("mailer", 2)], hint=None, stable_name="box-1",
                             shards=shards, ttl_ms=60_000)
    lua.run(r, *membership.beat_call(member, 60_000, record))


@pytest.fixture
def seeded(runtime, clock, r) -> None:
    """Queued, retried, busy and dead jobs, and a live server: every part of every answer filled in."""
    make_dead(runtime, OrdersWorker, [{"id": "dead-1", "payload": {"n": 1}}, {"id": "dead-2", "payload": [1, 2]},
                                      {"id": "all3", "payload": "first"}], error=b"it broke")
    OrdersWorker.perform_async([{"id": f"q{i}", "payload": {"i": i}, "perform_in": clock() + 10 * i} for i in range(6)]
                               + [{"id": "retried", "payload": "r"}, {"id": "a-late", "perform_in": clock() + 1000}])
    fail(runtime, OrdersWorker, ["retried"])
    OrdersWorker.perform_async([{"id": "all3", "payload": "second"}])
    q = runtime.queue(OrdersWorker)
    taken = q.ack_and_take(None, (held_lease(q, q.shard_of("all3")), 100))
    assert "all3" in {job.id for job in taken.jobs}
    OrdersWorker.perform_async([{"id": "all3", "payload": "third", "score": 5.5, "tags": ["vip", "acct-7"]}])
    MailerWorker.perform_async([{"id": "m1", "perform_in": clock() - 5}])
    beat(r, "server-a", {"OrdersWorker": [0, 1], "mailer": [0]})
    seed_history(r, OrdersWorker.queue_name, clock(), [(0, 0, 0.0), (60, 1, 2.5)])  # one minute of rates


def get_paths(spec: Spec) -> list[str]:
    return [path for path, item in spec.doc["paths"].items() if "get" in item]


def call(client, spec: Spec, path: str, **query: str):
    required = {p["name"]: QUERY_VALUES[p["name"]] for p in map(spec.deref, spec.operation(path, "get").get("parameters", []))
                if p["in"] == "query" and p["required"]}
    return client.get(url(path), query_string={**required, **query})


def test_every_get_answer_matches_its_schema(client, spec, seeded):
    answers = {}
    for path in get_paths(spec):
        reply = call(client, spec, path)
        assert reply.status_code == 200, (path, reply.data[:300])
        answers[path] = spec.check(reply, path)
    # The answers hold every kind of row, so the nested schemas were exercised.
    lookup = answers["/api/v1/workers/{worker}/jobs/{job_id}"]
    assert all(lookup[where] for where in ("queued", "busy", "morgue"))
    assert answers["/api/v1/workers/{worker}/job"] == lookup
    assert lookup["tags"] == ["vip", "acct-7"]
    assert answers["/api/v1/workers/{worker}/tagged/{tag}"] == {"tag": "vip", "next": None, "jobs": [
        {"id": "all3", "tags": ["vip", "acct-7"], "queued": True, "busy": True, "dead": True}]}
    # The search answers that lookup in each worker holding the id (waiting versions aside): here only OrdersWorker.
    searched = answers["/api/v1/search"]
    assert lookup["waiting"] == [] and lookup["dependents"] == []
    assert {k: v for k, v in searched.items() if k not in ("history", "searched")} == {"id": "all3", "found": [
        {"worker": "OrdersWorker", **{k: v for k, v in lookup.items() if k not in ("id", "waiting", "dependents")}}]}
    assert searched["searched"] == {"from": 0, "workers": 2, "of": 2, "continue": None}
    # ... and its history in that worker, newest first: the id was enqueued, taken, failed, ...
    (remembered,) = searched["history"]
    assert remembered["worker"] == "OrdersWorker" and remembered["events"][-1]["kind"] == "enqueued"
    history = answers["/api/v1/workers/{worker}/job/history"]
    assert history["events"] and history["worker"] == "OrdersWorker"
    assert any(job["error"] for job in answers["/api/v1/workers/{worker}/enqueued"]["jobs"])
    assert answers["/api/v1/workers/{worker}/morgue"]["jobs"]
    assert answers["/api/v1/servers"]["servers"][0]["shards"] == {"OrdersWorker": [0, 1], "MailerWorker": [0]}
    assert answers["/api/v1/stats"]["total"]["lag"] > 0
    assert answers["/api/v1/history"]["total"] and answers["/api/v1/history"]["by_worker"]["OrdersWorker"]
    assert answers[DOC] == spec.doc


def test_stats_with_groups_match_their_schema(client, spec, runtime, clock):
    # 21 groups: the 20 biggest and "(other)", the most the document allows
    OrdersWorker.perform_async([{"id": f"g{i}-{k}", "group": f"g{i:02}", "perform_in": clock() - i}
                                for i in range(21) for k in range(i + 1)])
    data = spec.check(client.get(url("/api/v1/stats")), "/api/v1/stats")
    assert len(data["by_worker"]["OrdersWorker"]["groups"]) == 21 and "groups" not in data["total"]
    with pytest.raises(ValidationError):  # the schema binds: a group without its lag is refused
        spec.validator(spec.response_pointer("/api/v1/stats", "get", 200)).validate(
            {**data, "by_worker": {"OrdersWorker": {**data["by_worker"]["OrdersWorker"], "groups": {"g": {"length": 1}}}}})


def test_documented_defaults_are_the_defaults(client, spec, seeded):
    for path in get_paths(spec):
        for param in map(spec.deref, spec.operation(path, "get").get("parameters", [])):
            schema = spec.deref(param["schema"])
            if param["in"] != "query" or "default" not in schema:
                continue
            implicit = call(client, spec, path).get_json()
            explicit = call(client, spec, path, **{param["name"]: str(schema["default"])}).get_json()
            assert implicit == explicit, (path, param["name"])


def _bound(order: str) -> tuple[str, str]:
    if order == "id":
        return "a", "q3"
    if order in TIME_ORDERS:
        return "2023-11-14 00:00", "2100-01-01T00:00:00+00:00"
    return "-1", "5"


def test_broken_registry_entries_answer_as_documented(redis_url, runtime, r):
    OrdersWorker.perform_async([{"id": 1}])  # registers OrdersWorker
    r.hset(registry_hash(), mapping={"NoQueue": '{"shards_count": 2}'})
    standalone = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
    spec = Spec(standalone.get(DOC).get_json())
    assert set(spec.check(standalone.get("/api/v1/stats"), "/api/v1/stats")["broken"]) == {"NoQueue"}
    assert spec.check(standalone.get("/api/v1/dashboard"), "/api/v1/dashboard")["broken"][0]["name"] == "NoQueue"
    broken = standalone.get("/api/v1/workers/NoQueue/busy")
    assert broken.status_code == 404
    spec.check(broken, "/api/v1/workers/{worker}/busy")


def test_every_order_filter_and_cursor_of_the_listings(client, spec, seeded):
    listings = [path for path in get_paths(spec) if any(
        spec.deref(p)["name"] == "order_by" for p in spec.operation(path, "get").get("parameters", []))]
    assert sorted(listings) == ["/api/v1/workers/{worker}/enqueued", "/api/v1/workers/{worker}/morgue"]
    for path in listings:
        order_by = next(spec.deref(p) for p in spec.operation(path, "get")["parameters"]
                        if spec.deref(p)["name"] == "order_by")
        for order in order_by["schema"]["enum"]:
            for desc in ("0", "TRUE"):
                low, high = _bound(order)
                first = spec.check(call(client, spec, path, order_by=order, desc=desc, limit="1"), path)
                assert first["jobs"] and first["next"] and first["previous"] is None, (path, order)
                second = spec.check(call(client, spec, path, order_by=order, desc=desc, limit="1",
                                         after=first["next"]), path)
                back = spec.check(call(client, spec, path, order_by=order, desc=desc, limit="1",
                                       before=second["previous"]), path)
                assert back["jobs"] == first["jobs"]
                spec.check(call(client, spec, path, order_by=order, desc=desc, min=low, max=high), path)


def test_the_tag_lookup_pages_as_documented(client, spec, runtime):
    path = "/api/v1/workers/{worker}/tagged/{tag}"
    OrdersWorker.perform_async([{"id": f"t{n}", "tags": ["vip"]} for n in range(5)])
    seen, after = [], None
    while True:
        page = spec.check(client.get(url(path), query_string={"limit": "2", **({"after": after} if after else {})}),
                          path)
        seen += [job["id"] for job in page["jobs"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert sorted(seen) == [f"t{n}" for n in range(5)]
    for query in ({"after": "x"}, {"limit": "0"}):
        assert spec.check(client.get(url(path), query_string=query), path).keys() == {"error"}
    assert client.get(url(path, tag="x" * 65)).status_code == 400


def test_an_action_answers_as_documented(client, spec, seeded):
    path = "/api/v1/workers/{worker}/morgue/requeue"
    body = {"ids": ["dead-1", "missing", 7]}
    spec.check_body(body, path)
    reply = client.post(url(path), data=json.dumps(body), content_type="application/json")
    assert spec.check(reply, path, "post") == {"count": 1}
    bulk = "/api/v1/workers/{worker}/perform_all_now"
    spec.check_body({}, bulk)
    assert spec.check(client.post(url(bulk), data="", content_type="application/json"), bulk, "post")["count"] > 0
    audit = spec.check(client.get(PREFIX + "/api/v1/audit"), "/api/v1/audit")
    assert [(e["action"], e["source"], e["scope"]) for e in audit["entries"]] == [
        ("perform_all_now", "api", "all"), ("perform_all_now", "api", "all: started"), ("morgue/requeue", "api", "")]


def test_pause_and_resume_answer_as_documented(client, spec, seeded):
    pause, resume = "/api/v1/workers/{worker}/pause", "/api/v1/workers/{worker}/resume"
    spec.check_body({}, pause)
    assert spec.check(client.post(url(pause), data="{}", content_type="application/json"), pause, "post") == {
        "paused": True, "changed": True}
    assert spec.check(client.post(url(pause), data="", content_type="application/json"), pause, "post") == {
        "paused": True, "changed": False}
    dashboard = spec.check(client.get(PREFIX + "/api/v1/dashboard"), "/api/v1/dashboard")
    [paused] = [q["paused"] for q in dashboard["queues"] if q["paused"]]
    assert paused["source"] == "api"
    assert spec.check(client.post(url(resume), data="", content_type="application/json"), resume, "post") == {
        "paused": False, "changed": True}
    refused = client.post(url(resume), data='{"all": true}', content_type="application/json")
    assert refused.status_code == 400 and "resume takes no parameters" in spec.check(refused, resume, "post")["error"]


def test_group_pause_groups_and_day_stats_answer_as_documented(client, spec, seeded):
    pause, resume = "/api/v1/workers/{worker}/groups/{group}/pause", "/api/v1/workers/{worker}/groups/{group}/resume"
    OrdersWorker.perform_async([{"id": "g1", "group": "acme"}])
    assert spec.check(client.post(url(pause), data="", content_type="application/json"), pause, "post") == {
        "group": "acme", "paused": True, "changed": True}
    groups = spec.check(client.get(url("/api/v1/workers/{worker}/groups")), "/api/v1/workers/{worker}/groups")
    assert groups["groups"][0]["paused"]["source"] == "api"
    assert spec.check(client.post(url(resume), data="", content_type="application/json"), resume, "post")["changed"]
    stats = "/api/v1/workers/{worker}/stats"
    bad = client.get(url(stats), query_string={"day": "2026-02-30"})
    assert bad.status_code == 400 and "day must be" in spec.check(bad, stats)["error"]
    assert spec.check(client.get(url(stats), query_string={"day": "2026-02-28"}), stats)["run"]["count"] == 0


def test_retry_now_and_the_search_answer_as_documented(client, spec, seeded, clock):
    path = "/api/v1/workers/{worker}/enqueued/retry_now"
    for body in ({"id": "a-late"}, {"id": 7}):
        spec.check_body(body, path)
    for bad in ({}, {"id": ""}, {"ids": ["a-late"]}, {"id": True}):
        with pytest.raises(ValidationError):
            spec.check_body(bad, path)
    assert spec.check(post_json(client, url(path), {"id": "a-late"}), path, "post") == {"count": 1}
    assert spec.check(post_json(client, url(path), {"id": "a-late"}), path, "post") == {"count": 0}
    for body, status in (({"id": "dead-1"}, 404), ({"id": ""}, 400), ({"id": "a-late", "x": 1}, 400)):
        reply = post_json(client, url(path), body)
        assert reply.status_code == status, body
        spec.check(reply, path, "post")
    ghost = post_json(client, url(path, worker="Ghost"), {"id": "a-late"})
    assert ghost.status_code == 404
    spec.check(ghost, path, "post")
    audit = spec.check(client.get(PREFIX + "/api/v1/audit"), "/api/v1/audit")
    assert [(e["action"], e["source"], e["ids"], e["count"]) for e in audit["entries"]] == [
        ("enqueued/perform_now", "api", ["a-late"], 0), ("enqueued/perform_now", "api", ["a-late"], 1)]
    search = "/api/v1/search"
    assert spec.check(call(client, spec, search, id="nowhere"), search) == {
        "id": "nowhere", "found": [], "history": [], "searched": {"from": 0, "workers": 2, "of": 2, "continue": None}}
    for query in ({"id": ""}, {"id": "x" * 10_001}, {"id": "a", "from": "-1"}, {"id": "a", "from": "3"}):
        refused = call(client, spec, search, **query)
        assert refused.status_code == 400
        spec.check(refused, search)


def post_json(client, path: str, body: Any):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_the_desc_pattern_is_what_the_listings_accept(spec):
    desc = next(p for p in spec.operation("/api/v1/workers/{worker}/morgue", "get")["parameters"] if p.get("name") == "desc")
    accepts = Draft202012Validator(desc["schema"]).is_valid
    assert all(accepts(word) for word in ("1", "0", "true", "TRUE", "No", "oFF", "yes"))
    assert not any(accepts(word) for word in ("y", "1 ", "", "2", "truex"))


def test_the_documented_bodies_refuse_what_the_api_refuses(spec):
    path = "/api/v1/workers/{worker}/morgue/requeue"
    for bad in ([1], {"ids": "1"}, {"ids": [True]}, {"ids": [""]}, {"ids": ["1"], "all": 1}, {}):
        with pytest.raises(ValidationError):
            spec.check_body(bad, path)
    with pytest.raises(ValidationError):
        spec.check_body({"ids": ["1"]}, "/api/v1/workers/{worker}/morgue/delete_all")


def test_errors_answer_the_error_schema(client, spec, seeded):
    listing = "/api/v1/workers/{worker}/morgue"
    for query in ({"order_by": "perform_in"}, {"desc": "y"}, {"limit": "0"}, {"min": "nan", "order_by": "updated_at"},
                  {"after": "nope"}, {"after": "1:a", "before": "1:a"}):
        reply = client.get(url(listing), query_string=query)
        assert reply.status_code == 400, query
        assert spec.check(reply, listing)["error"]
    missing = client.get(url("/api/v1/workers/{worker}/jobs/{job_id}", job_id="none"))
    assert missing.status_code == 404
    spec.check(missing, "/api/v1/workers/{worker}/jobs/{job_id}")
    ghost = client.get(url(listing, worker="Ghost"))
    assert ghost.status_code == 404 and spec.check(ghost, listing) == {"error": "unknown worker 'Ghost'"}
    no_id = call(client, spec, "/api/v1/workers/{worker}/job", id="")
    assert no_id.status_code == 400
    spec.check(no_id, "/api/v1/workers/{worker}/job")
    for limit in ("1001", "\u00b2", "-1", ""):
        audit = client.get(PREFIX + "/api/v1/audit", query_string={"limit": limit})
        assert audit.status_code == 400, limit
        spec.check(audit, "/api/v1/audit")
    history = client.get(PREFIX + "/api/v1/history?hours=5")
    assert history.status_code == 400
    spec.check(history, "/api/v1/history")
    for verb in ("pause", "resume"):
        ghost_pause = client.post(url(f"/api/v1/workers/{{worker}}/{verb}", worker="Ghost"), data="{}",
                                  content_type="application/json")
        assert ghost_pause.status_code == 404
        spec.check(ghost_pause, f"/api/v1/workers/{{worker}}/{verb}", "post")

    action = "/api/v1/workers/{worker}/morgue/requeue"
    for reply, status in [
        (client.post(url(action), data='{"ids": "1"}', content_type="application/json"), 400),
        (client.post(url(action), data='{"ids": ["1"]}', content_type="text/plain"), 415),
        (client.post(url(action), data='{"ids": ["1"]}', content_type="application/json",
                     headers={"Origin": "https://elsewhere.example"}), 403),
        (client.post(url(action), data='{"ids": ["1"]}', content_type="application/json",
                     headers={"Sec-Fetch-Site": "cross-site"}), 403),
        (client.post(url(action), data=b" " * (1024 * 1024 + 1), content_type="application/json"), 413),
        (client.post(url(action, worker="Ghost"), data='{"ids": ["1"]}', content_type="application/json"), 404),
    ]:
        assert reply.status_code == status, (status, reply.data[:200])
        spec.check(reply, action, "post")


def test_a_wrong_answer_fails_the_check(spec):
    """The checks above resolve the document's references and would catch a shape the API does not answer."""
    pointer = spec.response_pointer("/api/v1/workers/{worker}/enqueued", "get", 200)
    job = {"id": "1", "payloads": [["p", 1.0]], "perform_in": 1.0, "retry_count": -1, "error": None}
    spec.validator(pointer).validate({"jobs": [job], "next": None, "previous": None})
    for wrong in ({"jobs": [{**job, "retry_count": "0"}], "next": None, "previous": None},
                  {"jobs": [{**job, "payloads": [["p"]]}], "next": None, "previous": None},
                  {"jobs": [job], "next": "no-colon", "previous": None},
                  {"jobs": [job], "next": None}):
        with pytest.raises(ValidationError):
            spec.validator(pointer).validate(wrong)
