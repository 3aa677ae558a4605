"""Bad input to the JSON API is a 400 naming it, never a 500: integer query parameters take ASCII digits only, a
JSON value of the wrong type is refused; and the OpenAPI document says which bounds the listings and the
"matching" actions accept."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from openapi_support import PREFIX, Spec, url
from test_webui_openapi import get_paths
from webui_support import OrdersWorker, make_dead

from lowkiq.console import AREA_ORDERS
from lowkiq.store.queries import ENQUEUED_ORDERS, MORGUE_ORDERS

API = PREFIX + "/api/v1"
# "²" and ARABIC-INDIC DIGIT ONE are digits to str.isdigit (and int() reads the latter): the API takes ASCII
# digits only.
NOT_WHOLE_NUMBERS = ("²", "1²", "\u0661", "0x10", "1.0", " 5", "5 ", "")


@pytest.fixture
def spec(client) -> Spec:
    return Spec(client.get(API + "/openapi.json").get_json())


@pytest.fixture
def seeded(runtime) -> None:
    make_dead(runtime, OrdersWorker, [{"id": "dead-1"}])
    OrdersWorker.perform_async([{"id": "q1"}])


def post_json(client, path: str, body: Any):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_a_limit_that_is_not_ascii_digits_is_a_400_naming_it(client, seeded):
    for path, query in ((API + "/workers/OrdersWorker/job/history", {"id": "q1"}), (API + "/audit", {})):
        for limit in (*NOT_WHOLE_NUMBERS, "0", "1001"):
            reply = client.get(path, query_string={**query, "limit": limit})
            assert reply.status_code == 400, (path, limit)
            assert reply.get_json() == {"error": f"limit must be a whole number from 1 to 1000, got {limit!r}"}
        assert client.get(path, query_string={**query, "limit": "7"}).status_code == 200


def test_every_integer_query_parameter_refuses_what_is_not_ascii_digits(client, spec, seeded):
    checked = []
    for path in get_paths(spec):
        parameters = [spec.deref(p) for p in spec.operation(path, "get").get("parameters", [])]
        required = {p["name"]: "q1" for p in parameters if p["in"] == "query" and p["required"]}
        for param in parameters:
            if param["in"] != "query" or spec.deref(param["schema"]).get("type") != "integer":
                continue
            for text in NOT_WHOLE_NUMBERS[:-1]:  # an empty listing limit is the default, as documented
                reply = client.get(url(path), query_string={**required, param["name"]: text})
                assert reply.status_code == 400, (path, param["name"], text)
                assert param["name"] in spec.check(reply, path)["error"]
            checked.append((path, param["name"]))
    assert len(checked) >= 5  # both listings' limit, the history's hours, the audit's and a job history's limit


def test_a_json_value_of_the_wrong_type_in_any_field_of_any_action_is_a_400(client, spec, seeded):
    """{"action": {}} made "matching" answer 500 (an unhashable value looked up in a dict)."""
    matching = API + "/workers/OrdersWorker/morgue/matching"
    reply = post_json(client, matching, {"action": {}, "dry_run": True})
    assert reply.status_code == 400
    assert reply.get_json() == {"error": '"action" must be one of requeue, delete on morgue jobs, got {}'}
    bad_values = ({}, [], [[]], {"a": []}, True, None, 1.5, -1)
    fields = ("action", "dry_run", "confirm", "order_by", "min", "max", "error_class", "error", "payload", "ids", "id")
    posts = [path for path, item in spec.doc["paths"].items() if "post" in item]
    for path in posts:
        target = url(path, name="nope")
        base: dict[str, Any] = ({"action": "delete", "dry_run": True} if path.endswith("/matching")
                                else {"id": "q1"} if path.endswith("/retry_now")
                                else {"ids": ["nope"]} if spec.operation(path, "post")["requestBody"]["required"]
                                else {})
        for field in fields:
            for value in bad_values:
                body = {**base, field: value}
                reply = post_json(client, target, body)
                # A value the route reads as absent or as a bound may be fine (200); never a 500.
                assert reply.status_code in (200, 400, 404), (path, body, reply.status_code)
                if reply.status_code != 200:
                    assert spec.check(reply, path, "post")["error"]
    assert len(posts) > 10


# ---- what the document says the bounds are ------------------------------------------------------------------

BOUND_TEXTS = ("5", "-1.5", " 1e3 ", ".5", "5.", "1_000", "-inf", "-Infinity", "+inf", "inf", "INF", "", "  ",
               "2024-05-01", "2024-05-01 12:00", "2024-05-01T12:00:00+00:00", "2024-05-01T12Z", "abc", "nan", "NaN",
               "2024-13-01", "2024-05-01T25:00", "5 apples", "0x10", "--1", "1e", "job-07")


def test_listing_bounds_by_the_default_order_are_what_the_schema_says(client, spec, seeded):
    """A listing ordered by its default (a time) takes what its min and max schemas take, and nothing else;
    ordered by id it takes any text, which their descriptions say."""
    for area in ("enqueued", "morgue"):
        path = f"/api/v1/workers/{{worker}}/{area}"
        parameters = {p["name"]: p for p in map(spec.deref, spec.operation(path, "get")["parameters"])}
        for name in ("min", "max"):
            documented = Draft202012Validator(parameters[name]["schema"]).is_valid
            assert "by `id`, any text is a bound" in parameters[name]["description"]
            for text in BOUND_TEXTS:
                status = client.get(url(path), query_string={name: text}).status_code
                assert (status == 200) == documented(text), (area, name, text, status)
                assert client.get(url(path), query_string={"order_by": "id", name: text}).status_code == 200
        # Two parameters that exclude each other: the descriptions say it, the server refuses both.
        assert "Never with `before`" in parameters["after"]["description"]
        assert "Never with `after`" in parameters["before"]["description"]
        both = client.get(url(path), query_string={"after": "1:a", "before": "1:a"})
        assert both.status_code == 400 and "either after or before" in both.get_json()["error"]


@pytest.mark.parametrize(("area", "order_by"), [(area, order) for area, orders in
                                                (("enqueued", ENQUEUED_ORDERS), ("morgue", MORGUE_ORDERS))
                                                for order in (None, *orders)])
def test_matching_bounds_are_what_the_body_schema_says_for_each_order(client, spec, seeded, area, order_by):
    path = f"/api/v1/workers/{{worker}}/{area}/matching"
    verb = "delete"
    for name in ("min", "max"):
        for value in (*BOUND_TEXTS, 5, -1.5, 0, None):
            body = {"action": verb, "dry_run": True, **({"order_by": order_by} if order_by else {}), name: value}
            try:
                spec.check_body(body, path)
                documented = True
            except ValidationError:
                documented = False
            reply = post_json(client, url(path), body)
            assert (reply.status_code == 200) == documented, (body, reply.status_code, reply.get_data(True)[:200])
    orders = AREA_ORDERS[area]
    if order_by is None or order_by == orders.default:  # the document knows absent means the default
        with pytest.raises(ValidationError):
            spec.check_body({"action": verb, "dry_run": True, "min": "abc"}, path)


def test_the_bound_patterns_name_the_side_of_each_infinity(spec):
    listing = {p["name"]: p for p in map(spec.deref, spec.operation("/api/v1/workers/{worker}/morgue", "get")["parameters"])}
    low, high = (re.compile(listing[name]["schema"]["pattern"]) for name in ("min", "max"))
    assert low.search("-inf") and not low.search("+inf") and not low.search("inf")
    assert high.search("+inf") and high.search("inf") and not high.search("-inf")
