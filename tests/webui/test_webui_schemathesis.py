"""Property-based checks of the console's API against its own OpenAPI document, in-process (WSGI) on a real
redis-server: for the per-worker routes of hot ids, tag listings, day stats and groups, and the enqueued and
morgue listings (their content filters and match_case), every generated request answers without a server
error, with a status code the document lists and a body that conforms to its schema."""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance
from webui_support import OrdersWorker, host_app, make_dead

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
ROUTES = r"/workers/\{worker\}/(hot|tagged/\{tag\}|stats|groups|enqueued|morgue)$"


@pytest.fixture
def operations(runtime):
    """The document as the console serves it, its operations called on the same app in-process; the worker's
    queue holds tagged, grouped, delayed and dead jobs so that the real readers answer, not only the 404s."""
    now = time.time()
    make_dead(runtime, OrdersWorker, [{"id": "dead-1", "payload": "TimeoutError"}], error=b"TimeoutError: 30 s")
    OrdersWorker.perform_async([{"id": f"ord-{i}", "payload": {"n": i}, "tags": ["vip"] if i % 2 else [],
                                 "group": f"tenant-{i % 3}", "perform_in": now - i} for i in range(12)])
    OrdersWorker.perform_async([{"id": "later", "payload": 1, "perform_in": now + 3600}])
    schema = schemathesis.openapi.from_wsgi("/lowkiq/api/v1/openapi.json", host_app()).include(path_regex=ROUTES)
    return [result.ok() for result in schema.get_all_operations()]


def test_the_routes_are_all_checked(operations):
    assert sorted(op.label for op in operations) == [
        f"GET /api/v1/workers/{{worker}}/{route}"
        for route in ("enqueued", "groups", "hot", "morgue", "stats", "tagged/{tag}")]


# The negative modes take a few seconds each on a loaded machine.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, pytest.param(GenerationMode.NEGATIVE, marks=pytest.mark.slow)],
                         ids=["valid", "invalid"])
@pytest.mark.parametrize("worker", [None, OrdersWorker.__name__], ids=["any-worker", "the-worker"])
def test_the_api_answers_as_documented(operations, mode, worker):
    """Generated requests valid by the document (positive) and invalid ones (negative), for any worker name
    (almost always not a worker: 404) and for the worker whose queue is seeded."""
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not any(p.location == "query" for p in operation.iter_parameters()):
            continue  # a worker's name is any text: with no query parameter no request is invalid by the document
        path_parameters = None if worker is None else {"worker": worker}

        @given(case=operation.as_strategy(mode, path_parameters=path_parameters))
        @settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def answers(case):
            case.call_and_validate(checks=CHECKS)

        answers()
