"""Content filters in the store: scan.lua examines a bounded number of ids per step (and a bounded number of
bytes), from a cursor; a page of a search goes on where the last stopped; spilled ids are searched through
their spill; a bulk action bound to a count re-checks each id's content."""

from __future__ import annotations

from typing import Any

import pytest
from webui_support import OrdersWorker, fail, make_dead

import lowkiq
from lowkiq.store import lua, search
from lowkiq.store.actions import Filter
from lowkiq.store.search import Bounds, Content, Continuation, Search


class One(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 5

    def perform(self, payloads_by_id: Any) -> None:
        pass


@pytest.fixture
def rt(configure):
    return configure(workers=[One, OrdersWorker])


def searcher(rt, worker=One) -> Search:
    return Search(rt.client, rt.queue(worker).keys)


def scan(rt, area, cursor, *, ids=1000, nbytes=1 << 20, cls="", err="", payload="", wanted=1000,
         bounds=("id", "", "")):
    keys = rt.queue(One).keys.shards()[0]
    found, examined, following = lua.run(rt.client, "scan", keys,
                                         (area, cursor, ids, nbytes, cls, err, payload, *bounds, wanted))
    text = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731
    return [text(i) for i in found], int(examined), text(following) if following else None


def test_a_step_examines_at_most_its_budget_and_answers_a_cursor(rt):
    make_dead(rt, One, [{"id": f"j{i:03}", "payload": {"n": i}} for i in range(25)],
              error=b"TimeoutError: mailbox full")
    found, examined, cursor = scan(rt, "morgue", "", ids=10, err="mailbox")
    assert (found, examined, cursor) == ([f"j{i:03}" for i in range(10)], 10, "mj009")
    found, examined, cursor = scan(rt, "morgue", cursor, ids=10, err="mailbox")
    assert found[0] == "j010" and examined == 10
    found, examined, cursor = scan(rt, "morgue", cursor, ids=10, err="mailbox")
    assert (len(found), examined, cursor) == (5, 5, None)


def test_error_class_text_and_payload_each_narrow_the_match(rt):
    make_dead(rt, One, [{"id": "a", "payload": {"to": "x@example.com"}}], error=b"TimeoutError: mailbox full")
    make_dead(rt, One, [{"id": "b", "payload": {"to": "y@example.org"}}], error=b"KeyError: 'mailbox'")
    make_dead(rt, One, [{"id": "c", "payload": "plain"}], error=b"no class here")
    assert scan(rt, "morgue", "", cls="TimeoutError")[0] == ["a"]
    assert scan(rt, "morgue", "", err="mailbox")[0] == ["a", "b"]
    assert scan(rt, "morgue", "", payload="example.org")[0] == ["b"]
    assert scan(rt, "morgue", "", cls="KeyError", payload="example.com")[0] == []
    assert scan(rt, "morgue", "", cls="no class here")[0] == ["c"]
    # plain substrings: a Lua pattern's magic characters mean themselves
    assert scan(rt, "morgue", "", err="'mailbox'")[0] == ["b"]
    assert scan(rt, "morgue", "", err="m.ilbox")[0] == []


def test_the_byte_budget_ends_a_step_early(rt):
    make_dead(rt, One, [{"id": f"j{i}", "payload": "x" * 1000} for i in range(10)])
    found, examined, cursor = scan(rt, "morgue", "", payload="nothing", nbytes=2500)
    assert (found, examined) == ([], 3) and cursor == "mj2"


def test_queued_jobs_fresh_then_retried_and_the_id_bounds(rt):
    One.perform_async([{"id": f"q{i}", "payload": f"p{i}"} for i in range(6)])
    fail(rt, One, ["q0"], error=b"RuntimeError: boom")  # every due job of the shard fails: all retried
    One.perform_async([{"id": "q9", "payload": "p9 boom"}])
    found, examined, cursor = scan(rt, "enqueued", "", payload="p")
    assert found == ["q9", "q0", "q1", "q2", "q3", "q4", "q5"] and cursor is None
    found, _, cursor = scan(rt, "enqueued", "", payload="p", ids=1)
    assert (found, cursor) == (["q9"], "fq9")
    assert scan(rt, "enqueued", cursor, payload="p", ids=1)[:2] == (["q0"], 1)
    assert scan(rt, "enqueued", "", err="boom")[0] == ["q0", "q1", "q2", "q3", "q4", "q5"]
    assert scan(rt, "enqueued", "", payload="p", bounds=("id", "q2", "q4"))[0] == ["q2", "q3", "q4"]


def test_a_spilled_id_is_searched_through_its_spill(rt):
    One.perform_async([{"id": "big", "payload": f"v{i}", "score": i} for i in range(100)])
    One.perform_async([{"id": "small", "payload": "v1"}])
    assert rt.client.hget(rt.queue(One).keys.shards()[0].payloads_hash, "big")[:1] == b"\xc1"  # spilled
    assert scan(rt, "enqueued", "", payload="v99")[0] == ["big"]
    assert scan(rt, "enqueued", "", payload="v1")[0] == ["big", "small"]


def test_pages_continue_across_shards_and_say_what_was_examined(rt):
    make_dead(rt, OrdersWorker, [{"id": f"o{i:02}", "payload": "hit" if i % 3 == 0 else "miss"} for i in range(30)])
    s = searcher(rt, OrdersWorker)
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        page = s.page("morgue", Content(payload="hit"), limit=3, after=after)
        assert page.total == 30 and len(page.ids) <= 3
        seen += page.ids
        pages += 1
        if page.next is None:
            assert page.examined == 30
            break
        after = Continuation.decode(page.next.encode())
    assert sorted(seen) == [f"o{i:02}" for i in range(0, 30, 3)] and len(seen) == len(set(seen))
    assert pages >= 4


def test_a_page_stops_at_its_examined_budget(rt):
    make_dead(rt, One, [{"id": f"j{i:03}"} for i in range(50)])
    page = searcher(rt).page("morgue", Content(payload="nowhere"), limit=10, examined_budget=20)
    assert page.ids == [] and page.examined == 20 and page.next is not None
    following = searcher(rt).page("morgue", Content(payload="nowhere"), limit=10, after=page.next, examined_budget=20)
    assert following.examined == 40


def test_bounds_on_a_score_combine_with_the_content(rt, clock):
    make_dead(rt, One, [{"id": "early"}], error=b"E: x")
    clock.advance(100)
    make_dead(rt, One, [{"id": "late"}], error=b"E: x")
    bounds = Bounds("updated_at", repr(clock() - 10), "")
    assert searcher(rt).page("morgue", Content(error_class="E"), limit=10, bounds=bounds).ids == ["late"]


def test_bad_needles_are_refused():
    with pytest.raises(ValueError, match="at most 200 characters"):
        Content(error="x" * (search.MAX_NEEDLE + 1))
    with pytest.raises(ValueError, match="malformed continuation"):
        Continuation.decode("nonsense")


def test_an_action_bound_to_a_count_skips_jobs_whose_content_changed(rt):
    make_dead(rt, One, [{"id": "a"}, {"id": "b"}], error=b"TimeoutError: slow")
    counted = [i for chunk in searcher(rt).ids("morgue", Content(error_class="TimeoutError")) for i in chunk]
    assert counted == ["a", "b"]
    make_dead(rt, One, [{"id": "b"}], error=b"KeyError: gone")  # b dies again, of another error
    make_dead(rt, One, [{"id": "c"}], error=b"TimeoutError: slow")  # matches only after the count
    within = Filter("id", content=Content(error_class="TimeoutError"), area="morgue")
    assert rt.actions(One).morgue_requeue(counted, within=within) == 1
    assert {j.id for j in rt.queries(One).morgue("id").rows} == {"b", "c"}
