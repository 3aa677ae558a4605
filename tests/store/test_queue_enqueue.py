import json
import math

import pytest
from queue_support import OrdersWorker, RoundTrips, queries, queued, snapshot

import lowkiq


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def test_defaults_payload_empty_string_score_and_perform_in_now(clock):
    assert OrdersWorker.perform_async([{"id": 0}]) == 1
    job = queued("0")
    assert job.payloads == [("", clock.now)]
    assert job.perform_in == clock.now
    assert job.retry_count == -1
    assert job.error is None


def test_int_id_becomes_str_and_explicit_values_are_kept(clock):
    OrdersWorker.perform_async([{"id": 2, "payload": {"attr": "v1"}, "score": 5, "perform_in": clock.now + 60}])
    job = queued("2")
    assert job.id == "2"
    assert job.payloads == [({"attr": "v1"}, 5.0)]
    assert job.perform_in == clock.now + 60


def test_scores_keep_full_double_precision(clock):
    OrdersWorker.perform_async([{"id": "p", "score": 1700000000.123456, "perform_in": 1700000000.654321}])
    job = queued("p")
    assert job.payloads[0][1] == 1700000000.123456
    assert job.perform_in == 1700000000.654321


def test_payloads_are_canonical_json_so_equal_dicts_merge():
    OrdersWorker.perform_async([{"id": 1, "payload": {"b": 1, "a": [1, 2]}, "score": 2}])
    OrdersWorker.perform_async([{"id": 1, "payload": {"a": [1, 2], "b": 1}, "score": 1}])
    assert queued("1").payloads == [({"a": [1, 2], "b": 1}, 1.0)]


def test_unicode_ids_and_payloads_round_trip():
    OrdersWorker.perform_async([{"id": "заказ-1", "payload": {"note": "żółć ✓"}}])
    assert queued("заказ-1").payloads[0][0] == {"note": "żółć ✓"}


def test_duplicate_ids_in_one_batch_merge_into_one_job():
    assert OrdersWorker.perform_async([{"id": 7, "payload": "a", "score": 3}, {"id": 7, "payload": "b", "score": 1},
                                       {"id": 7, "payload": "a", "score": 2}]) == 1
    assert queued("7").payloads == [("b", 1.0), ("a", 2.0)]


@pytest.mark.parametrize(
    "bad_id, error",
    [(None, TypeError), (True, TypeError), (1.5, TypeError), ({"x": 1}, TypeError), ("", ValueError), ([], TypeError)],
)
def test_bad_ids_are_rejected_naming_the_job(r, bad_id, error):
    with pytest.raises(error, match="job 1"):
        OrdersWorker.perform_async([{"id": 1}, {"id": bad_id}])
    assert r.dbsize() == 0


def test_missing_id_and_unknown_keys_are_rejected(r):
    with pytest.raises(ValueError, match="job 0: missing 'id'"):
        OrdersWorker.perform_async([{"payload": 1}])
    with pytest.raises(ValueError, match=r"job 0: unknown keys \['perfom_in'\]"):
        OrdersWorker.perform_async([{"id": 1, "perfom_in": 3}])
    assert r.dbsize() == 0


def test_a_job_that_is_not_a_dict_or_a_batch_that_is_not_a_list(r):
    with pytest.raises(TypeError, match="job 0: must be a dict"):
        OrdersWorker.perform_async([1])
    with pytest.raises(TypeError, match="takes a list of jobs"):
        OrdersWorker.perform_async({"id": 1})
    assert r.dbsize() == 0


@pytest.mark.parametrize("payload", [object(), {1, 2}, float("nan"), {"when": b"bytes"}])
def test_unencodable_payload_is_a_clear_error_at_enqueue(r, payload):
    with pytest.raises((TypeError, ValueError), match=r"job 1 \(id '2'\): payload cannot be serialized"):
        OrdersWorker.perform_async([{"id": 1}, {"id": 2, "payload": payload}])
    assert r.dbsize() == 0


@pytest.mark.parametrize("field", ["score", "perform_in"])
@pytest.mark.parametrize("value, error", [("soon", TypeError), (None, TypeError), (True, TypeError),
                                          (math.inf, ValueError), (math.nan, ValueError)])
def test_non_numeric_score_or_perform_in(r, field, value, error):
    with pytest.raises(error, match=f"job 2: {field}"):
        OrdersWorker.perform_async([{"id": 1}, {"id": 2}, {"id": 3, field: value}])
    assert r.dbsize() == 0


def test_a_bad_job_in_the_middle_of_a_batch_leaves_redis_unchanged(r):
    OrdersWorker.perform_async([{"id": i, "payload": i} for i in range(50)])
    before = snapshot(r)
    jobs = [{"id": i, "payload": f"new {i}"} for i in range(100)]
    jobs[60]["score"] = "not a number"
    with pytest.raises(TypeError, match="job 60"):
        OrdersWorker.perform_async(jobs)
    assert snapshot(r) == before


def test_ten_thousand_jobs_take_a_handful_of_round_trips(r, monkeypatch):
    OrdersWorker.perform_async([{"id": "warm-up"}])  # registers the worker and connects once
    trips = RoundTrips(monkeypatch)
    r.config_resetstat()
    OrdersWorker.perform_async([{"id": i, "payload": str(i)} for i in range(10_000)])
    assert trips.count == 1 + 1  # one pipeline of push scripts, plus this test's CONFIG RESETSTAT
    # Slices of at most 2,000 jobs per script keep Redis responsive meanwhile.
    assert r.info("commandstats")["cmdstat_evalsha"]["calls"] == 6
    assert queries().enqueued("id", limit=1).rows[0].id == "0"


def test_pickle_is_an_explicit_opt_in(configure):
    from lowkiq import serializers

    configure(workers=[OrdersWorker], dump_payload=serializers.dump_pickle, load_payload=serializers.load_pickle)
    OrdersWorker.perform_async([{"id": 1, "payload": {"when": b"\x00\xff bytes", "set": {1, 2}}}])
    assert queued("1").payloads[0][0] == {"when": b"\x00\xff bytes", "set": {1, 2}}


def test_client_middlewares_wrap_enqueue_and_may_rewrite_the_batch(configure):
    seen = []

    def stamp(worker, batch, call_next):
        seen.append((worker.__name__, len(batch)))
        for job in batch:
            job["payload"] = {"stamped": job.get("payload")}
        return call_next()

    configure(workers=[OrdersWorker], client_middlewares=[stamp])
    OrdersWorker.perform_async([{"id": 1, "payload": "x"}])
    assert seen == [("OrdersWorker", 1)]
    assert queued("1").payloads[0][0] == {"stamped": "x"}


def test_perform_async_can_be_overridden_to_compute_ids(configure):
    class ByPayloadId(lowkiq.Worker):
        @classmethod
        def perform_async(cls, jobs):
            return super().perform_async([{**job, "id": job["payload"]["order"]} for job in jobs])

        def perform(self, payloads_by_id):
            pass

    configure(workers=[ByPayloadId])
    ByPayloadId.perform_async([{"payload": {"order": 9}}, {"payload": {"order": 9, "v": 2}}])
    assert [j.id for j in queries(ByPayloadId).enqueued("id").rows] == ["9"]


def test_enqueue_registers_the_worker_for_the_standalone_console(r):
    from lowkiq.store import registry

    OrdersWorker.perform_async([{"id": 1}])
    assert [(w.name, w.queue_name, w.shards_count) for w in registry.known(r)] == [("OrdersWorker", "OrdersWorker", 3)]


def test_not_configured_is_a_clear_error():
    lowkiq.runtime._current = None
    with pytest.raises(lowkiq.runtime.NotConfigured, match="lowkiq.configure"):
        OrdersWorker.perform_async([{"id": 1}])


def test_a_burst_in_one_call_keeps_its_order_without_scores():
    OrdersWorker.perform_async([{"id": 1, "payload": {"v": v}} for v in (2, 10, 3, 1)])
    assert [p["v"] for p, _ in queued("1").payloads] == [2, 10, 3, 1]


def test_equal_scores_order_payloads_bytewise_whatever_the_locale():
    OrdersWorker.perform_async([{"id": 1, "payload": p, "score": 5} for p in ("b", "B", "a", "é", "A")])
    assert [p for p, _ in queued("1").payloads] == sorted(["b", "B", "a", "é", "A"], key=lambda p: f'"{p}"'.encode())


def test_huge_score_and_broken_unicode_id_name_the_job(r):
    with pytest.raises(ValueError, match="job 1: score 1000.* is too large"):
        OrdersWorker.perform_async([{"id": 1}, {"id": 2, "score": 10**400}])
    with pytest.raises(ValueError, match="job 0: id .* is not valid UTF-8"):
        OrdersWorker.perform_async([{"id": "bad\udc80"}])
    assert r.dbsize() == 0


class Versions(lowkiq.Worker):
    shards_count = 2
    max_payloads_per_id = 10_000

    def perform(self, payloads_by_id):
        pass


@pytest.mark.slow
def test_default_score_and_perform_in_come_from_the_redis_servers_clock(configure, r):
    """Producers on hosts whose clocks disagree still agree: the push script reads Redis's TIME."""
    from lowkiq.jobs import prepare
    from lowkiq.serializers import dump_json

    configure(workers=[Versions])
    q = lowkiq.current().queue(Versions)

    def redis_now() -> float:
        seconds, micros = r.time()
        return seconds + micros / 1e6

    before = redis_now()
    # A burst bigger than one push script: 5,000 versions of one id, in the order given.
    q.push(prepare([{"id": "x", "payload": v} for v in range(5000)], now=None, dump_payload=dump_json))
    after = redis_now()
    job = lowkiq.current().queries(Versions).job("x")
    assert before <= job.perform_in <= after
    assert [p for p, _ in job.payloads] == list(range(5000))
    scores = [s for _, s in job.payloads]
    assert scores == sorted(scores) and len(set(scores)) == 5000 and before <= scores[0] <= scores[-1] <= after + 1


def test_a_later_call_without_scores_orders_after_an_earlier_one_whatever_the_producers_clock(configure, r, monkeypatch):
    import time as time_module

    runtime = configure(workers=[OrdersWorker])
    runtime.clock = time_module.time  # the real clock: defaults are Redis's
    OrdersWorker.perform_async([{"id": "y", "payload": "v1"}])
    real = time_module.time
    monkeypatch.setattr(time_module, "time", lambda: real() - 3600)  # this host's clock is an hour behind
    runtime.clock = time_module.time
    OrdersWorker.perform_async([{"id": "y", "payload": "v2"}])
    job = lowkiq.current().queries(OrdersWorker).job("y")
    assert [p for p, _ in job.payloads] == ["v1", "v2"]


class Capped(lowkiq.Worker):
    shards_count = 2
    max_payloads_per_id = 3

    def perform(self, payloads_by_id):
        pass


class Strict(lowkiq.Worker):
    shards_count = 2
    max_payloads_per_id = 3
    payload_overflow = "reject"

    def perform(self, payloads_by_id):
        pass


def test_past_max_payloads_per_id_the_oldest_payloads_are_dropped_and_counted(configure, r):
    configure(workers=[Capped])
    Capped.perform_async([{"id": "a", "payload": v, "score": v} for v in range(5)])
    Capped.perform_async([{"id": "a", "payload": 9, "score": 9}, {"id": "b", "payload": 1}])
    job = lowkiq.current().queries(Capped).job("a")
    assert [p for p, _ in job.payloads] == [3, 4, 9]
    shard = Capped.keys().shard(lowkiq.current().queue(Capped).shard_of("a"))
    assert r.hget(shard.counters_hash, "dropped") == b"3"


def test_with_the_reject_policy_an_id_past_the_limit_raises_and_nothing_of_its_slice_is_written(configure, r):
    configure(workers=[Strict])
    Strict.perform_async([{"id": "a", "payload": v, "score": v} for v in range(3)])
    before = snapshot(r)
    with pytest.raises(Exception, match=r"PAYLOAD_LIMIT id a would hold 4 payloads; the limit is 3"):
        Strict.perform_async([{"id": "a", "payload": 7, "score": 7}])
    assert snapshot(r) == before


def test_a_worker_with_a_bad_payload_limit_or_policy_is_refused_at_definition():
    with pytest.raises(ValueError, match="max_payloads_per_id must be a positive int or None"):
        type("Bad", (lowkiq.Worker,), {"max_payloads_per_id": 0})
    with pytest.raises(ValueError, match="payload_overflow must be one of drop_oldest, reject"):
        type("Bad", (lowkiq.Worker,), {"payload_overflow": "ignore"})


class CappedAtAThousand(lowkiq.Worker):
    max_payloads_per_id = 1000

    def perform(self, payloads_by_id):
        pass


def test_by_default_an_id_keeps_every_payload(configure, r, caplog):
    configure(workers=[OrdersWorker])
    assert OrdersWorker.max_payloads_per_id is None
    OrdersWorker.perform_async([{"id": "hot", "payload": v, "score": v} for v in range(2500)])
    OrdersWorker.perform_async([{"id": "hot", "payload": 9999, "score": 9999}])
    job = lowkiq.current().queries(OrdersWorker).job("hot")
    assert [p for p, _ in job.payloads] == [*range(2500), 9999]
    shard = OrdersWorker.keys().shard(lowkiq.current().queue(OrdersWorker).shard_of("hot"))
    assert r.hget(shard.counters_hash, "dropped") is None
    assert "dropped" not in caplog.text


def test_a_caps_drops_are_logged_by_the_producer_and_counted_in_the_metrics(configure, r, caplog):
    configure(workers=[Capped])
    with caplog.at_level("WARNING", logger="lowkiq"):
        Capped.perform_async([{"id": "a", "payload": v, "score": v} for v in range(5)])
    assert "Capped: 2 older payloads dropped past max_payloads_per_id = 3" in caplog.text
    from lowkiq.store.metrics import FULL, MetricsReader

    [read], _ = MetricsReader(lowkiq.current().client).read([Capped.keys()], 0.0, kind=FULL)
    assert read.dropped == 2


@pytest.mark.slow
def test_adding_a_payload_to_an_id_at_its_limit_costs_what_it_costs_below_it(configure, r):
    """One id that held 300,000 payloads made each new one cost 625 ms in Redis; a cap bounds it."""
    configure(workers=[CappedAtAThousand])
    CappedAtAThousand.perform_async([{"id": "hot", "payload": v, "score": v} for v in range(50_000)])
    job = lowkiq.current().queries(CappedAtAThousand).job("hot")
    assert len(job.payloads) == CappedAtAThousand.max_payloads_per_id
    r.config_resetstat()
    for v in range(50_000, 50_020):
        CappedAtAThousand.perform_async([{"id": "hot", "payload": v, "score": v}])
    usec = r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
    assert usec < 5_000, f"{usec:.0f} µs per push at the limit"


@pytest.mark.parametrize("bad_id", ["twin\x00", "a\rb", "line\n", "tab\there", "bell\x07", "del\x7f", "\x1b[31m"])
def test_ids_with_control_characters_are_rejected_naming_the_job_and_nothing_is_written(r, bad_id):
    """A NUL or a CR LF would not survive an HTML form: ticking 'twin\\x00' posted 'twin\\ufffd'."""
    with pytest.raises(ValueError, match=r"job 1: id .* contains the control character"):
        OrdersWorker.perform_async([{"id": "fine"}, {"id": bad_id}])
    assert r.dbsize() == 0


def test_printable_unicode_ids_pass_the_control_character_check():
    ids = ["заказ 1", "a\u00a0b", "emoji-✓", "a\u2028b", "c\x85d"]  # isprintable() is False for some: not controls
    OrdersWorker.perform_async([{"id": i} for i in ids])
    assert sorted(j.id for j in queries().enqueued("id", limit=10).rows) == sorted(ids)


def test_an_int_id_too_long_for_text_and_a_payload_nested_too_deeply_name_the_job(r):
    with pytest.raises(ValueError, match="job 1: id is an int of .* too long"):
        OrdersWorker.perform_async([{"id": 1}, {"id": 10**5000}])
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(ValueError, match=r"job 2 \(id '3'\): payload cannot be serialized: it is nested too deeply"):
        OrdersWorker.perform_async([{"id": 1}, {"id": 2}, {"id": 3, "payload": nested}])
    assert r.dbsize() == 0


@pytest.mark.parametrize("name", ["a/b", "a..b", "has space", "new\nline", "soh\x01", "q?x", "frag#x", "pct%41", ".hidden"])
def test_worker_and_queue_names_that_would_break_urls_are_refused_at_definition(name):
    with pytest.raises(ValueError, match="worker name .* may hold only"):
        type(name, (lowkiq.Worker,), {})
    with pytest.raises(ValueError, match=r"Fine.queue_name .* may hold only"):
        type("Fine", (lowkiq.Worker,), {"queue_name": name})


@pytest.mark.parametrize("count", [0, 4097, 200_000, True, "5"])
def test_shards_count_is_bounded_at_definition(count):
    with pytest.raises(ValueError, match=r"Bad.shards_count must be a positive int, at most 4096"):
        type("Bad", (lowkiq.Worker,), {"shards_count": count})
    assert type("Wide", (lowkiq.Worker,), {"shards_count": 4096}).shards_count == 4096


def test_a_producer_reuses_its_queue_until_the_clock_or_the_client_changes(clock):
    runtime = lowkiq.current()
    first = runtime.queue(OrdersWorker)
    assert runtime.queue(OrdersWorker) is first  # a one-job perform_async builds no Queue
    # a clock set by hand after the first push is the next push's clock
    later = type(clock)(clock.now + 500)
    runtime.clock = later
    OrdersWorker.perform_async([{"id": "late"}])
    assert queued("late").perform_in == later.now
    assert runtime.queue(OrdersWorker) is not first
    # a closed runtime's transport is not used again: the next push opens a new one
    again = runtime.queue(OrdersWorker)
    runtime.close()
    OrdersWorker.perform_async([{"id": "after-close"}])
    assert runtime.queue(OrdersWorker) is not again and queued("after-close").perform_in == later.now


def test_json_payloads_load_as_json_loads_would_whatever_their_bytes():
    # load_json decodes lowkiq's own UTF-8 straight; other encodings json.loads guesses, and its errors, are kept
    from lowkiq.serializers import dump_json, load_json

    for value in ({"b": [1, 2.5, None]}, "é€😀", 1e300, ""):
        assert load_json(dump_json(value)) == value
    assert load_json('{"a": "ü"}'.encode("utf-16")) == {"a": "ü"}
    assert load_json(b'\xef\xbb\xbf"with a BOM"') == "with a BOM"
    assert load_json(bytearray(b"[1]")) == [1]
    for bad in (b"{", b"", b"\xc3("):
        with pytest.raises(ValueError) as got:
            load_json(bad)
        with pytest.raises(ValueError) as expected:
            json.loads(bad)
        assert type(got.value) is type(expected.value)
