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


def scan(rt, area, cursor, *, ids=1000, work=1 << 20, cls="", err="", payload="", wanted=1000,
         bounds=("id", "", ""), match_case=True):
    keys = rt.queue(One).keys.shards()[0]
    weights = (search.compare_weight(err, match_case), search.compare_weight(payload, match_case))
    found, examined, following, _ = lua.run(rt.client, "scan", keys,
                                            (area, cursor, ids, work, cls, err, payload, *bounds, wanted, *weights,
                                             "1" if match_case else ""))
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


def test_the_work_budget_ends_a_step_early(rt):
    make_dead(rt, One, [{"id": f"j{i}", "payload": "x" * 1000} for i in range(10)])
    # A dead job's payloads are one value of about 1,010 bytes, read, decoded and compared: 4 units a byte.
    found, examined, cursor = scan(rt, "morgue", "", payload="nothing", work=9000)
    assert (found, examined) == ([], 2) and cursor == "mj1"
    # A job that would pass the budget is left to the next step, which reads it whatever the budget.
    assert scan(rt, "morgue", "mj1", payload="nothing", work=10)[1:] == (1, "mj2")


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


def scan_all(rt, payload, *, work, ids=1000):
    """Every step of a search through the shard: the ids found, and each step's cursor."""
    found: list[str] = []
    cursors: list[str] = []
    cursor = ""
    while True:
        hits, _, cursor = scan(rt, "enqueued", cursor, payload=payload, work=work, ids=ids)
        found += hits
        if cursor is None:
            return found, cursors
        cursors.append(cursor)


def test_a_spilled_id_is_read_in_steps_that_go_on_inside_it(rt):
    # 100 payloads of about 1 KB: about 3 KB of work each (read, then compared at 2 units a byte).
    payloads = ["x" * 1000 for _ in range(100)]
    payloads[97] = "x" * 500 + "needle" + "x" * 494
    One.perform_async([{"id": "deep", "payload": p + str(i), "score": i} for i, p in enumerate(payloads)])
    One.perform_async([{"id": "split", "payload": "x" * 1000 + "nee", "score": 0},
                       *({"id": "split", "payload": f"dle{i}", "score": i + 1} for i in range(70))])
    found, cursors = scan_all(rt, "needle", work=20_000)
    assert found == ["deep"]  # a needle across two payloads of "split" is no match
    inside = [c for c in cursors if c.startswith("F")]
    assert len(inside) >= 10 and inside[0].startswith("F") and inside[0].endswith(",0,deep")
    positions = [int(c[1:].split(",")[0]) for c in inside if c.endswith(",deep")]
    assert positions == sorted(positions) and positions[-1] <= 97
    # A needle in no payload: the whole id is read, in steps, and nothing found.
    assert scan_all(rt, "nowhere", work=20_000)[0] == []


def test_a_payload_too_big_for_a_step_is_compared_a_window_at_a_time(rt):
    # A window is a step's budget over the compare weight (2), or an eighth of the payload when that is more:
    # 200,000 bytes (as stored: JSON, in quotes) / 8 = 25,000. Each id's big payload is its last (the highest
    # score), after 70 small ones: it is the 71st, position 70.
    def big(at: int) -> str:  # the needle at byte ``at`` of the stored payload
        return "x" * (at - 1) + "needle" + "x" * (200_000 - 2 - 6 - (at - 1))

    for job_id, at in (("across", 24_997), ("later", 49_990)):
        One.perform_async([{"id": job_id, "payload": f"p{i}", "score": i} for i in range(70)])
        One.perform_async([{"id": job_id, "payload": big(at), "score": 100}])
    found, cursors = scan_all(rt, "needle", work=20_000)
    assert found == ["across", "later"]
    # A needle across the first window's end is found by it (windows overlap by the needle's length less one);
    # one in the second window is found by the step after.
    assert "F70,25000,later" in cursors and not any(c.startswith("F70,25000,") for c in cursors if "across" in c)
    assert scan_all(rt, "needle!", work=20_000)[0] == []


def test_a_page_stops_at_its_work_budget_inside_an_id(rt):
    # 2 MB of payloads, 3 units of work a byte: about six steps of search.STEP_WORK.
    One.perform_async([{"id": "deep", "payload": "x" * 20_000 + str(i), "score": i} for i in range(100)])
    One.perform_async([{"id": "deep", "payload": "the needle", "score": 1000}, {"id": "z", "payload": "needle"}])
    s = searcher(rt)
    page = s.page("enqueued", Content(payload="needle"), limit=10, work_budget=search.STEP_WORK)
    assert page.ids == [] and page.examined == 0 and page.next is not None and page.next.cursor.startswith("F")
    seen, after = [], page.next
    while after is not None:
        page = s.page("enqueued", Content(payload="needle"), limit=10, after=Continuation.decode(after.encode()),
                      work_budget=search.STEP_WORK)
        seen += page.ids
        after = page.next
    assert seen == ["deep", "z"] and page.examined == 2


def test_a_cursor_inside_an_id_is_checked():
    assert Continuation.decode("3:0:F12,0,order-7").cursor == "F12,0,order-7"
    for bad in ("3:0:F12,x,order-7", "3:0:F12,0,", "3:0:G1,0,a"):
        with pytest.raises(ValueError, match="malformed continuation"):
            Continuation.decode(bad)


def test_letters_compare_ignoring_case_unless_asked(rt):
    make_dead(rt, One, [{"id": "a", "payload": {"to": "Ops@Example.com"}}], error=b"TimeoutError: Timeout after 30 s")
    make_dead(rt, One, [{"id": "b", "payload": "x"}], error=b"ValueError: timeout_ms must be a number")
    blind = dict(match_case=False)
    assert scan(rt, "morgue", "", err="TIMEOUT", **blind)[0] == ["a", "b"]
    assert scan(rt, "morgue", "", cls="timeouterror", **blind)[0] == ["a"]
    assert scan(rt, "morgue", "", payload="ops@example", **blind)[0] == ["a"]
    assert scan(rt, "morgue", "", err="Timeout")[0] == ["a"]
    assert scan(rt, "morgue", "", cls="timeouterror")[0] == []
    # The search and the action's re-check agree, both ways.
    for match_case, expected in ((False, ["a", "b"]), (True, ["b"])):
        content = Content(error="timeout", match_case=match_case)
        assert [i for chunk in searcher(rt).ids("morgue", content) for i in chunk] == expected
        within = Filter("id", content=content, area="morgue")
        assert rt.actions(One).morgue_delete(["a", "b"], within=within) == len(expected)
        for job_id, error in (("a", b"TimeoutError: Timeout after 30 s"), ("b", b"ValueError: timeout_ms bad")):
            make_dead(rt, One, [{"id": job_id, "payload": "x"}], error=error)


def test_a_payload_window_is_compared_ignoring_case(rt):
    big = "x" * 100_000 + "NeEdLe" + "x" * 100_000
    One.perform_async([{"id": "big", "payload": big}])
    found, _ = scan_all_case(rt, "needle", work=20_000)
    assert found == ["big"]


def scan_all_case(rt, payload, *, work):
    found: list[str] = []
    cursors: list[str] = []
    cursor = ""
    while True:
        hits, _, cursor = scan(rt, "enqueued", cursor, payload=payload, work=work, match_case=False)
        found += hits
        if cursor is None:
            return found, cursors
        cursors.append(cursor)
