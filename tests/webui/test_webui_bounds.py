"""Lowkiq's range bounds on every listing: ``min=-inf`` and ``max=+inf`` (or ``inf``), as Lowkiq's API
and web client and Redis write them, mean "unbounded" for the console's pages, api/v1 and the exports,
enqueued and morgue, for every order_by; NaN is a 400 naming its bound."""

from __future__ import annotations

import pytest
from webui_support import OrdersWorker, fail, ids_in, make_dead

from lowkiq.console import listing
from lowkiq.store.queries import ENQUEUED_ORDERS, MORGUE_ORDERS

PREFIX = "/lowkiq"
UNBOUNDED = [{"min": "-inf", "max": "+inf"}, {"min": "-inf", "max": "inf"}, {"min": "-inf"}, {"max": "+inf"},
             {"max": "inf"}, {"min": " -INF ", "max": "Inf"}, {"min": "-inf", "max": ""}]
AREAS = [("enqueued", ENQUEUED_ORDERS), ("morgue", MORGUE_ORDERS)]


@pytest.fixture
def seeded(runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": f"d{i}", "payload": i} for i in range(3)])
    OrdersWorker.perform_async([{"id": f"q{i}", "payload": i, "perform_in": clock() + i} for i in range(4)])
    fail(runtime, OrdersWorker, ["q0"])  # one with retry_count 0, so every order has distinct values
    return {"enqueued": ["q0", "q1", "q2", "q3"], "morgue": ["d0", "d1", "d2"]}


@pytest.mark.slow
def test_every_listing_reads_lowkiq_s_infinities_as_no_bound(client, seeded):
    for area, orders in AREAS:
        for order_by in orders:
            for bounds in UNBOUNDED:
                query = {"order_by": order_by, **bounds}
                api = client.get(f"{PREFIX}/api/v1/workers/OrdersWorker/{area}", query_string=query)
                assert api.status_code == 200, (area, query, api.get_json())
                assert sorted(job["id"] for job in api.get_json()["jobs"]) == seeded[area], (area, query)
                page = client.get(f"{PREFIX}/workers/OrdersWorker/{area}", query_string=query)
                assert page.status_code == 200, (area, query)
                assert sorted(ids_in(page.data)) == seeded[area], (area, query)
                exported = client.get(f"{PREFIX}/workers/OrdersWorker/{area}/export",
                                      query_string={**query, "format": "jsonl"})
                assert exported.status_code == 200, (area, query)
                assert exported.get_data(as_text=True).count("\n") == len(seeded[area]), (area, query)


def test_nan_is_a_400_naming_the_bound(client, seeded):
    for area, orders in AREAS:
        for order_by in orders:
            if order_by == "id":
                continue  # "nan" is an id like any other
            for name in ("min", "max"):
                for nan in ("nan", "NaN", "-nan"):
                    query = {"order_by": order_by, name: nan}
                    api = client.get(f"{PREFIX}/api/v1/workers/OrdersWorker/{area}", query_string=query)
                    assert api.status_code == 400, (area, query)
                    assert api.get_json()["error"].startswith(f"{name} must be a number"), api.get_json()
                    page = client.get(f"{PREFIX}/workers/OrdersWorker/{area}", query_string=query)
                    assert page.status_code == 400 and f"{name} must be a number".encode() in page.data


def test_finite_bounds_still_filter_and_an_infinity_on_the_wrong_side_is_refused(client, seeded, clock):
    api = f"{PREFIX}/api/v1/workers/OrdersWorker/enqueued"
    within = client.get(api, query_string={"order_by": "perform_in", "min": "-inf", "max": repr(clock() + 2)})
    assert sorted(job["id"] for job in within.get_json()["jobs"]) == ["q1", "q2"]  # q0 retries a minute later
    by_id = client.get(api, query_string={"order_by": "id", "min": "q2", "max": "+inf"})
    assert [job["id"] for job in by_id.get_json()["jobs"]] == ["q2", "q3"]
    for name, value in (("min", "+inf"), ("min", "inf"), ("max", "-inf"), ("max", "-1e999")):
        refused = client.get(api, query_string={"order_by": "perform_in", name: value})
        assert refused.status_code == 400 and refused.get_json()["error"].startswith(f"{name} {value!r} matches nothing")


def test_bound_parsing():
    assert [listing.bound(text, order, name) for text, order, name in (
        ("-inf", "id", "min"), ("+inf", "id", "max"), ("inf", "retry_count", "max"), ("-Infinity", "updated_at", "min"),
        ("1e999", "perform_in", "max"), ("inf", "id", "min"), ("-inf", "id", "max"), ("12.5", "perform_in", "min"),
    )] == ["", "", "", "", "", "inf", "-inf", "12.5"]
    with pytest.raises(listing.BadInput, match="max must be a number, got 'nan'"):
        listing.bound("nan", "retry_count", "max")
