"""Content filters (error class, error text, payload) on the enqueued and dead listings of the console and the
JSON API: a bounded search with a continuation, and bulk actions bound to the jobs their dry run counted."""

from __future__ import annotations

import re

from webui_support import XSS, OrdersWorker, csrf, fail, make_dead

from lowkiq.store import audit

W = "/lowkiq/workers/OrdersWorker"
API = "/lowkiq/api/v1/workers/OrdersWorker"


def seed(runtime) -> None:
    make_dead(runtime, OrdersWorker, [{"id": f"t{i:02}", "payload": {"to": f"user{i}@example.com"}} for i in range(12)],
              error=b"TimeoutError: mailbox did not answer")
    make_dead(runtime, OrdersWorker, [{"id": f"k{i:02}", "payload": {"to": "ops@example.org"}} for i in range(5)],
              error=b"KeyError: 'recipient'")


def dead_ids(runtime) -> set[str]:
    return {j.id for j in runtime.queries(OrdersWorker).morgue("id", limit=1000).rows}


def test_the_api_pages_a_content_search_with_its_progress(client, runtime):
    seed(runtime)
    seen: list[str] = []
    args: dict[str, str] = {"error_class": "TimeoutError", "limit": "5"}
    while True:
        page = client.get(API + "/morgue", query_string=args)
        assert page.status_code == 200, page.json
        assert page.json["next"] is None and page.json["scan"]["total"] == 17
        seen += [job["id"] for job in page.json["jobs"]]
        following = page.json["scan"]["continue"]
        if following is None:
            assert page.json["scan"]["examined"] == 17
            break
        args["scan"] = following
    assert sorted(seen) == [f"t{i:02}" for i in range(12)]
    found = client.get(API + "/morgue", query_string={"payload": "example.org", "error": "recipient"}).json
    assert sorted(job["id"] for job in found["jobs"]) == [f"k{i:02}" for i in range(5)]
    assert "scan" not in client.get(API + "/morgue").json  # without content filters the reply keeps its shape


def test_queued_jobs_are_searched_by_their_last_error(client, runtime):
    OrdersWorker.perform_async([{"id": f"q{i}", "payload": {"n": i}} for i in range(8)])
    fail(runtime, OrdersWorker, [f"q{i}" for i in range(8)], error=b"RuntimeError: upstream 503")
    OrdersWorker.perform_async([{"id": "fresh", "payload": {"n": "upstream"}}])
    found = client.get(API + "/enqueued", query_string={"error": "503"}).json
    assert sorted(job["id"] for job in found["jobs"]) == [f"q{i}" for i in range(8)]
    assert [job["id"] for job in client.get(API + "/enqueued", query_string={"payload": "upstream"}).json["jobs"]] \
        == ["fresh"]


def test_bad_content_filters_are_refused_naming_the_problem(client, runtime):
    seed(runtime)
    for query, problem in (({"error": ""}, "error must not be empty"),
                           ({"payload": "x" * 201}, "payload must be at most 200 characters"),
                           ({"error": "a", "scan": "nonsense"}, "scan: malformed continuation"),
                           ({"scan": "0:0:m"}, "scan continues a content search"),
                           ({"error": "a", "after": "1.0:x"}, "pages with scan")):
        answer = client.get(API + "/morgue", query_string=query)
        assert answer.status_code == 400 and problem in answer.json["error"], (query, answer.json)
    refused = client.post(API + "/morgue/matching", json={"action": "requeue", "error": "", "dry_run": True})
    assert refused.status_code == 400 and "error must not be empty" in refused.json["error"]
    refused = client.post(API + "/morgue/matching", json={"action": "requeue", "payload": 5, "dry_run": True})
    assert refused.status_code == 400 and "payload must be text" in refused.json["error"]
    assert len(dead_ids(runtime)) == 17


def test_the_api_acts_on_exactly_the_jobs_its_content_count_named(client, runtime):
    seed(runtime)
    body = {"action": "requeue", "error": "mailbox"}
    dry = client.post(API + "/morgue/matching", json={**body, "dry_run": True})
    assert dry.status_code == 200 and dry.json["count"] == 12
    make_dead(runtime, OrdersWorker, [{"id": "late"}], error=b"TimeoutError: mailbox full")  # matches after the count
    make_dead(runtime, OrdersWorker, [{"id": "t00"}], error=b"ValueError: other")  # no longer matches
    mismatch = client.post(API + "/morgue/matching", json={**body, "error": "other", "confirm": dry.json["confirm"]})
    assert mismatch.status_code == 409 and mismatch.json["reason"] == "mismatch"
    dry = client.post(API + "/morgue/matching", json={**body, "dry_run": True})
    make_dead(runtime, OrdersWorker, [{"id": "later"}], error=b"TimeoutError: mailbox full")
    make_dead(runtime, OrdersWorker, [{"id": "t01"}], error=b"ValueError: other")
    done = client.post(API + "/morgue/matching", json={**body, "confirm": dry.json["confirm"]})
    assert done.status_code == 200 and done.json == {"touched": 11, "counted": 12, "skipped": 1}
    assert dead_ids(runtime) == {"t00", "t01", "later", *(f"k{i:02}" for i in range(5))}
    entry = audit.read(runtime.client)[0]
    assert entry.scope == "error containing 'mailbox'" and entry.count == 11


def test_the_dead_tab_filters_by_content_escapes_it_and_requeues_what_it_counted(client, runtime):
    seed(runtime)
    make_dead(runtime, OrdersWorker, [{"id": "x"}], error=("RuntimeError: " + XSS).encode())
    page = client.get(W + "/morgue", query_string={"error": XSS})
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and XSS not in html and "&lt;script&gt;" in html
    page = client.get(W + "/morgue", query_string={"error_class": "KeyError", "limit": "10"}).get_data(as_text=True)
    assert "examined 18 of 18" in page and "the search is done" in page
    assert page.count('name="ids"') == 5 and "Requeue matching</button>" in page
    listing = W + "/morgue?error_class=KeyError"
    form = {"csrf_token": csrf(client, listing), "next": listing, "error_class": "KeyError", "order_by": "updated_at"}
    asked = client.post(W + "/morgue/requeue_matching", data=form)
    assert asked.status_code == 200 and "Requeue 5 dead jobs?" in asked.get_data(as_text=True)
    token = re.search(r'name="confirm" value="([^"]+)"', asked.get_data(as_text=True)).group(1)
    assert 'name="error_class" value="KeyError"' in asked.get_data(as_text=True)
    done = client.post(W + "/morgue/requeue_matching", data={**form, "confirm": token})
    assert done.status_code == 303
    assert dead_ids(runtime) == {f"t{i:02}" for i in range(12)} | {"x"}


def test_the_continue_link_goes_on_where_the_page_stopped(client, runtime):
    seed(runtime)
    seen: set[str] = set()
    url = W + "/morgue?error_class=KeyError&limit=2"
    for _ in range(3):
        html = client.get(url).get_data(as_text=True)
        seen |= set(re.findall(r'aria-label="select (k[0-9]+)"', html))
        found = re.search(r'id="scan-continue" href="([^"]+)"', html)
        if found is None:
            break
        url = found.group(1).replace("&amp;", "&")
    assert seen == {f"k{i:02}" for i in range(5)}


def seed_cases(runtime) -> None:
    """Errors that differ by case only: the operator's "timeout" should find both kinds unless asked not to."""
    make_dead(runtime, OrdersWorker, [{"id": f"cap{i}", "payload": {"to": "Ops@Example.com"}} for i in range(3)],
              error=b"TimeoutError: Timeout after 30 s")
    make_dead(runtime, OrdersWorker, [{"id": "ord-timeout-092", "payload": {"to": "a@b"}}],
              error=b"ValueError: timeout_ms must be a number")


def test_content_filters_ignore_case_unless_match_case_is_given(client, runtime):
    seed_cases(runtime)
    found = lambda **query: sorted(j["id"] for j in client.get(API + "/morgue", query_string=query).json["jobs"])  # noqa: E731
    assert found(error="timeout after") == ["cap0", "cap1", "cap2"]
    assert found(error_class="timeouterror") == ["cap0", "cap1", "cap2"]
    assert found(payload="ops@example.COM") == ["cap0", "cap1", "cap2"]
    assert found(error="Timeout") == ["cap0", "cap1", "cap2", "ord-timeout-092"]
    assert found(error="Timeout", match_case="1") == ["cap0", "cap1", "cap2"]
    assert found(error="timeout", match_case="true") == ["ord-timeout-092"]
    assert found(error_class="timeouterror", match_case="1") == []
    refused = client.get(API + "/morgue", query_string={"error": "x", "match_case": "maybe"})
    assert refused.status_code == 400 and "match_case must be 0 or 1" in refused.json["error"]


def test_a_case_blind_count_binds_its_action_and_match_case_is_part_of_the_token(client, runtime):
    seed_cases(runtime)
    body = {"action": "requeue", "error": "timeout after"}
    dry = client.post(API + "/morgue/matching", json={**body, "dry_run": True})
    assert dry.status_code == 200 and dry.json["count"] == 3
    mismatch = client.post(API + "/morgue/matching", json={**body, "match_case": True, "confirm": dry.json["confirm"]})
    assert mismatch.status_code == 409 and mismatch.json["reason"] == "mismatch"
    dry = client.post(API + "/morgue/matching", json={**body, "dry_run": True})
    make_dead(runtime, OrdersWorker, [{"id": "late"}], error=b"TimeoutError: TIMEOUT AFTER 5 s")  # after the count
    done = client.post(API + "/morgue/matching", json={**body, "confirm": dry.json["confirm"]})
    assert done.status_code == 200 and done.json == {"touched": 3, "counted": 3, "skipped": 0}
    assert dead_ids(runtime) == {"ord-timeout-092", "late"}
    strict = client.post(API + "/morgue/matching", json={"action": "delete", "error": "TIMEOUT", "match_case": True,
                                                        "dry_run": True})
    assert strict.json["count"] == 1 and strict.json["sample"] == ["late"]
    refused = client.post(API + "/morgue/matching", json={**body, "match_case": "yes", "dry_run": True})
    assert refused.status_code == 400 and '"match_case" must be true or false' in refused.json["error"]


def test_the_dead_tab_says_it_ignores_case_and_keeps_match_case_through_its_actions(client, runtime):
    seed_cases(runtime)
    html = client.get(W + "/morgue", query_string={"error": "timeout after"}).get_data(as_text=True)
    assert 'name="match_case"' in html and "Match case" in html
    assert sorted(set(re.findall(r'name="ids" value="([^"]+)"', html))) == ["cap0", "cap1", "cap2"]
    html = client.get(W + "/morgue", query_string={"error": "timeout", "match_case": "1"}).get_data(as_text=True)
    assert re.findall(r'name="ids" value="([^"]+)"', html) == ["ord-timeout-092"]
    assert 'name="match_case" value="1" checked' in html
    assert '<input type="hidden" name="match_case" value="1">' in html  # the bulk form keeps it
    listing = W + "/morgue?error=timeout&match_case=1"
    form = {"csrf_token": csrf(client, listing), "next": listing, "error": "timeout", "match_case": "1",
            "order_by": "updated_at"}
    asked = client.post(W + "/morgue/delete_matching", data=form).get_data(as_text=True)
    assert "Delete 1 dead job for good" in asked and "matching case" in asked
