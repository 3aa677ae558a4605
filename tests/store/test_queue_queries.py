"""The console's read side: ranges in both directions, bounds, keyset paging, lookups."""

import pytest
from queue_support import OrdersWorker, RoundTrips, held_lease, restore

import lowkiq
from lowkiq.store.queries import Cursor


class Many(lowkiq.Worker):
    shards_count = 4
    max_retry_count = 1

    def perform(self, payloads_by_id):
        pass


def queries():
    return lowkiq.current().queries(Many)


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[Many, OrdersWorker])


def ids(page):
    return [j.id for j in page.rows]


def walk(fetch, limit):
    """Every row, page by page forward, then every page again backward."""
    pages = [fetch(limit=limit)]
    while pages[-1].has_more:
        pages.append(fetch(limit=limit, after=pages[-1].last))
    forward = [i for p in pages for i in ids(p)]
    back = [fetch(limit=limit, before=p.first) for p in pages[1:]]
    for prev, b in zip(pages, back):
        assert ids(b) == ids(prev)
    return forward


@pytest.fixture
def jobs(clock):
    # perform_in with many ties, so paging must break ties by id
    Many.perform_async([{"id": f"j{i:02}", "payload": i, "perform_in": clock.now + (i % 3)} for i in range(30)])
    return sorted(f"j{i:02}" for i in range(30))


def test_by_id_both_directions(jobs):
    assert ids(queries().enqueued("id", limit=100)) == jobs
    assert ids(queries().enqueued("id", desc=True, limit=100)) == jobs[::-1]


def test_by_id_bounds_are_inclusive(jobs):
    assert ids(queries().enqueued("id", min="j05", max="j09")) == ["j05", "j06", "j07", "j08", "j09"]
    assert ids(queries().enqueued("id", min="j27")) == ["j27", "j28", "j29"]
    assert ids(queries().enqueued("id", max="j01", desc=True)) == ["j01", "j00"]


def test_by_perform_in_orders_by_score_then_id(jobs, clock):
    expected = sorted(jobs, key=lambda i: (int(i[1:]) % 3, i))
    assert ids(queries().enqueued("perform_in", limit=100)) == expected
    assert ids(queries().enqueued("perform_in", desc=True, limit=100)) == expected[::-1]
    only_middle = queries().enqueued("perform_in", min=clock.now + 1, max=clock.now + 1, limit=100)
    assert ids(only_middle) == [i for i in expected if int(i[1:]) % 3 == 1]


@pytest.mark.parametrize("order_by", ["id", "perform_in", "retry_count"])
@pytest.mark.parametrize("desc", [False, True])
def test_paging_visits_every_row_once_in_order(jobs, order_by, desc, clock):
    Many.perform_async([{"id": "tmp-j03"}, {"id": "tmp-j14"}])
    everything = ids(queries().enqueued(order_by, desc=desc, limit=1000))
    assert len(everything) == 32
    for limit in (1, 7, 32):
        assert walk(lambda **kw: queries().enqueued(order_by, desc=desc, **kw), limit) == everything


def test_by_retry_count_puts_fresh_jobs_first(clock):
    Many.perform_async([{"id": i} for i in ("a", "b", "c", "d")])
    q = lowkiq.current().queue(Many)
    for job_id in ("b", "d"):
        shard = q.shard_of(job_id)
        taken = q.ack_and_take(None, (held_lease(q, shard), 100)).jobs
        q.fail(held_lease(q, shard), [(j.id, clock.now + 60) for j in taken if j.id == job_id], b"e", 5)
        restore(q, held_lease(q, shard))
    # "d" fails twice
    shard = q.shard_of("d")
    clock.advance(100)
    taken = q.ack_and_take(None, (held_lease(q, shard), 100)).jobs
    q.fail(held_lease(q, shard), [(j.id, clock.now + 60) for j in taken if j.id == "d"], b"e", 5)
    restore(q, held_lease(q, shard))
    rows = queries().enqueued("retry_count", limit=100).rows
    assert [(j.id, j.retry_count) for j in rows] == [("a", -1), ("c", -1), ("b", 0), ("d", 1)]
    assert ids(queries().enqueued("retry_count", desc=True)) == ["d", "b", "c", "a"]
    assert ids(queries().enqueued("retry_count", min=0)) == ["b", "d"]
    assert ids(queries().enqueued("retry_count", max=-1)) == ["a", "c"]
    assert ids(queries().enqueued("retry_count", min=1, max=1)) == ["d"]


def test_morgue_by_id_and_updated_at(clock):
    q = lowkiq.current().queue(Many)
    for n, job_id in enumerate(["m3", "m1", "m2"]):
        clock.advance(10)
        Many.perform_async([{"id": job_id, "payload": {"n": n}}])
        for _ in range(Many.max_retry_count + 1):
            shard = q.shard_of(job_id)
            q.ack_and_take(None, (held_lease(q, shard), 10))
            q.fail(held_lease(q, shard), [(job_id, clock.now)], f"err {job_id}".encode(), Many.max_retry_count)
    m = queries()
    assert ids(m.morgue("id")) == ["m1", "m2", "m3"]
    assert ids(m.morgue("id", desc=True)) == ["m3", "m2", "m1"]
    assert ids(m.morgue("updated_at")) == ["m3", "m1", "m2"]
    assert ids(m.morgue("updated_at", desc=True, limit=2)) == ["m2", "m1"]
    assert ids(m.morgue("updated_at", min=clock.now - 10)) == ["m1", "m2"]
    assert walk(lambda **kw: m.morgue("id", **kw), 1) == ["m1", "m2", "m3"]
    dead = m.morgue_job("m1")
    assert (dead.payloads, dead.error, dead.updated_at) == ([({"n": 1}, clock.now - 10)], "err m1", clock.now - 10)


def test_fetch_by_ids_keeps_the_given_order_and_skips_missing(jobs):
    assert [j.id for j in queries().jobs(["j09", "nope", "j01"])] == ["j09", "j01"]
    assert queries().job("nope") is None
    assert queries().jobs([]) == []


def test_a_page_is_two_round_trips_whatever_the_size(jobs, monkeypatch):
    trips = RoundTrips(monkeypatch)
    page = queries().enqueued("perform_in", limit=10)
    assert len(page.rows) == 10
    assert trips.count == 2


def test_busy_lists_processing_jobs_with_their_data(clock):
    Many.perform_async([{"id": "x", "payload": "p", "score": 3}])
    q = lowkiq.current().queue(Many)
    q.ack_and_take(None, (held_lease(q, q.shard_of("x")), 5))
    (job,) = queries().busy()
    assert (job.id, job.payloads, job.retry_count, job.perform_in) == ("x", [("p", 3.0)], -1, clock.now)
    assert queries().busy_job("x") == job
    assert queries().busy_job("y") is None


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="order_by must be one of id, perform_in, retry_count"):
        queries().enqueued("score")
    with pytest.raises(ValueError, match="order_by must be one of id, updated_at"):
        queries().morgue("perform_in")
    with pytest.raises(ValueError, match="min must be a number"):
        queries().enqueued("perform_in", min="yesterday")
    with pytest.raises(ValueError, match="limit must be an int in 1..1000"):
        queries().enqueued(limit=0)
    with pytest.raises(ValueError, match="malformed cursor"):
        Cursor.decode("nocolon")


def test_cursor_round_trips_ids_with_colons():
    c = Cursor(1700000000.123456, "order:42:x")
    assert Cursor.decode(c.encode()) == c


@pytest.mark.parametrize("desc", [False, True])
def test_paging_through_hundreds_of_rows_with_one_score(desc, clock):
    # After "perform all now" every job has the same perform_in: the cursor's id decides.
    Many.perform_async([{"id": f"t{i:03}", "perform_in": clock.now} for i in range(300)])
    everything = ids(queries().enqueued("perform_in", desc=desc, limit=1000))
    assert everything == sorted(everything, reverse=desc) and len(everything) == 300
    assert walk(lambda **kw: queries().enqueued("perform_in", desc=desc, **kw), 13) == everything
    bounded = ids(queries().enqueued("perform_in", desc=desc, min=clock.now, max=clock.now, limit=1000))
    assert bounded == everything
    assert queries().enqueued("perform_in", min=clock.now + 1).rows == []
