"""``await Worker.aperform_async(jobs)``: perform_async's contract without blocking the event loop, on a real
redis-server, Redis Cluster and Sentinel; and ``lowkiq.testing.inline()`` covering it."""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import pytest
import redis

import lowkiq
import lowkiq.testing
from lowkiq.errors import ConfigurationError

performed: list[tuple[str, list[Any], Any]] = []
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class Orders(lowkiq.Worker):
    shards_count = 8
    batch_size = 5

    async def perform(self, payloads_by_id):
        await asyncio.sleep(0)
        for job_id, payloads in payloads_by_id.items():
            performed.append((job_id, payloads, lowkiq.context().fencing_token))


class Plain(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        for job_id, payloads in payloads_by_id.items():
            performed.append((job_id, payloads, None))


@pytest.fixture(autouse=True)
def _clean() -> Any:
    performed.clear()
    yield
    lowkiq.runtime._current = None


async def ticker(stop: asyncio.Event, period: float = 0.01) -> float:
    """The largest delay of a 10 ms tick behind its schedule while the loop is shared."""
    worst = 0.0
    expected = time.monotonic() + period
    while not stop.is_set():
        await asyncio.sleep(max(0.0, expected - time.monotonic()))
        worst = max(worst, time.monotonic() - expected)
        expected = max(expected + period, time.monotonic())
    return worst


async def enqueue_beside_a_ticker(worker: type[lowkiq.Worker], jobs: int) -> tuple[int, float]:
    stop = asyncio.Event()
    tick = asyncio.ensure_future(ticker(stop))
    await asyncio.sleep(0.05)
    counts = await asyncio.gather(*(worker.aperform_async([{"id": f"{part}-{i}", "payload": i} for i in range(1000)])
                                    for part in range(jobs // 1000)))
    stop.set()
    return sum(counts), await tick


def test_aperform_async_returns_the_distinct_ids_written_and_merges(configure: Any, r: redis.Redis) -> None:
    configure(workers=[Orders])

    async def main() -> int:
        return await Orders.aperform_async([{"id": "1", "payload": "a", "score": 1}, {"id": "1", "payload": "b", "score": 2},
                                            {"id": "2", "payload": "c"}])

    assert asyncio.run(main()) == 2
    job = lowkiq.current().queries(Orders).job("1")
    assert job is not None and [p for p, _ in job.payloads] == ["a", "b"]


def test_aperform_async_validates_like_perform_async_and_writes_nothing_of_a_bad_call(configure: Any,
                                                                                      r: redis.Redis) -> None:
    configure(workers=[Orders])

    async def main(jobs: Any) -> int:
        return await Orders.aperform_async(jobs)

    for bad in ([{"id": "1", "payload": 1}, {"payload": 2}], [{"id": "1", "payload": 1}, {"id": "x", "score": "soon"}]):
        with pytest.raises((TypeError, ValueError)) as sync_error:
            Orders.perform_async(bad)
        with pytest.raises(type(sync_error.value)) as async_error:
            asyncio.run(main(bad))
        assert str(async_error.value) == str(sync_error.value)
        assert "1" in str(async_error.value)  # the bad job's index
    assert lowkiq.current().queries(Orders).job("1") is None


def test_client_middlewares_wrap_aperform_async_with_the_callers_context_variables(configure: Any,
                                                                                    r: redis.Redis) -> None:
    seen: list[tuple[str, int]] = []

    def tag(worker: Any, jobs: Any, call_next: Any) -> Any:
        seen.append((request_id.get(), len(jobs)))
        return call_next()

    configure(workers=[Orders], client_middlewares=[tag])

    async def main() -> int:
        request_id.set("req-7")
        return await Orders.aperform_async([{"id": "1"}, {"id": "2"}])

    assert asyncio.run(main()) == 2
    assert seen == [("req-7", 2)]


def test_a_ten_ms_ticker_beside_ten_thousand_enqueued_jobs_never_falls_200_ms_behind(configure: Any,
                                                                                     r: redis.Redis) -> None:
    configure(workers=[Orders])
    count, worst = asyncio.run(enqueue_beside_a_ticker(Orders, 10_000))
    assert count == 10_000
    assert worst <= 0.2, worst
    assert sum(r.zcard(shard.ids_by_perform_in_zset) for shard in Orders.keys().shards()) == 10_000


@pytest.mark.slow
def test_aperform_async_on_a_redis_cluster_counts_and_keeps_the_loop_free(cluster: Any) -> None:
    lowkiq.configure(redis_url=cluster.url, workers=[Orders])
    count, worst = asyncio.run(enqueue_beside_a_ticker(Orders, 10_000))
    assert count == 10_000
    assert worst <= 0.2, worst
    assert lowkiq.current().queries(Orders).job("3-999") is not None

    async def bad() -> int:
        return await Orders.aperform_async([{"id": "ok"}, {"id": ""}])

    with pytest.raises(ValueError):
        asyncio.run(bad())


@pytest.mark.slow
def test_aperform_async_through_sentinel(sentinel: Any) -> None:
    lowkiq.configure(redis_url=sentinel.url, workers=[Orders])

    async def main() -> int:
        return await Orders.aperform_async([{"id": str(i)} for i in range(50)])

    assert asyncio.run(main()) == 50
    assert lowkiq.current().queries(Orders).job("49") is not None


# ---- lowkiq.testing.inline() -----------------------------------------------------------------------------


def test_inline_awaits_an_async_workers_performs_with_a_context() -> None:
    async def main() -> int:
        with lowkiq.testing.inline():
            return await Orders.aperform_async([{"id": "1", "payload": "a", "score": 1},
                                                {"id": "1", "payload": "b", "score": 2}, {"id": "2", "payload": "c"}])

    assert asyncio.run(main()) == 2
    assert [(job_id, payloads) for job_id, payloads, _ in performed] == [("1", ["a", "b"]), ("2", ["c"])]
    assert all(token[1] > 0 for _, _, token in performed)


def test_inline_aperform_async_of_a_sync_worker_and_perform_async_of_an_async_one_outside_a_loop() -> None:
    async def main() -> int:
        with lowkiq.testing.inline():
            return await Plain.aperform_async([{"id": "p", "payload": 1}])

    assert asyncio.run(main()) == 1
    with lowkiq.testing.inline():
        assert Orders.perform_async([{"id": "o", "payload": 2}]) == 1
    assert [(job_id, payloads) for job_id, payloads, _ in performed] == [("p", [1]), ("o", [2])]


def test_inline_perform_async_of_an_async_worker_inside_a_running_loop_says_to_await_aperform_async() -> None:
    async def main() -> None:
        with lowkiq.testing.inline():
            Orders.perform_async([{"id": "o"}])

    with pytest.raises(RuntimeError, match="aperform_async"):
        asyncio.run(main())
    assert performed == []


def test_inline_propagates_an_async_performs_exception_and_validates() -> None:
    class Failing(lowkiq.Worker):
        async def perform(self, payloads_by_id):
            raise KeyError("nope")

    async def main(jobs: Any) -> int:
        with lowkiq.testing.inline():
            return await Failing.aperform_async(jobs)

    with pytest.raises(KeyError):
        asyncio.run(main([{"id": "1"}]))
    with pytest.raises(ValueError):
        asyncio.run(main([{"id": ""}]))


def test_inline_awaits_coroutine_server_middlewares_and_runs_a_plain_ones_call_next(configure: Any) -> None:
    order: list[str] = []

    async def timing(worker: Any, batch: Any, call_next: Any) -> Any:
        order.append("async before")
        result = await call_next()
        order.append("async after")
        return result

    def plain(worker: Any, batch: Any, call_next: Any) -> Any:
        order.append("plain")
        call_next()  # the awaitable dropped: the perform still runs

    configure(workers=[Orders], server_middlewares=[timing, plain])

    async def main() -> int:
        with lowkiq.testing.inline():
            return await Orders.aperform_async([{"id": "1"}])

    assert asyncio.run(main()) == 1
    assert order == ["async before", "plain", "async after"]
    assert [job_id for job_id, _, _ in performed] == ["1"]


# ---- configure ---------------------------------------------------------------------------------------------


def test_configure_refuses_the_combinations_an_async_worker_cannot_run_in(configure: Any) -> None:
    class InChild(lowkiq.Worker):
        isolation = "process"

        async def perform(self, payloads_by_id):
            pass

    class AsyncRetryIn(lowkiq.Worker):
        async def perform(self, payloads_by_id):
            pass

        async def retry_in(self, retry_count):
            return 1

    with pytest.raises(ConfigurationError, match="isolation"):
        configure(workers=[InChild])
    with pytest.raises(ConfigurationError, match="retry_in"):
        configure(workers=[AsyncRetryIn])
    with pytest.raises(ConfigurationError, match="splitter"):
        configure(workers=[Orders], build_splitter="default")

    async def mw(worker: Any, batch: Any, call_next: Any) -> Any:
        return await call_next()

    with pytest.raises(ConfigurationError, match="Plain"):
        configure(workers=[Orders, Plain], server_middlewares=[mw])
    with pytest.raises(ConfigurationError, match="coroutine"):
        configure(workers=[Plain], server_middlewares=[mw])
    configure(workers=[Orders], server_middlewares=[mw])  # async workers only: awaited


def test_a_sync_workers_async_retries_exhausted_stays_refused(configure: Any) -> None:
    class SyncWithAsyncHook(lowkiq.Worker):
        def perform(self, payloads_by_id):
            pass

        async def retries_exhausted(self, batch):
            pass

    with pytest.raises(ConfigurationError, match="retries_exhausted"):
        configure(workers=[SyncWithAsyncHook])


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10", 10_001])
def test_concurrency_must_be_a_positive_int(value: Any) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        type("Bad", (lowkiq.Worker,), {"concurrency": value, "perform": lambda self, batch: None})


def test_the_registry_records_an_async_workers_concurrency_for_the_console(configure: Any, redis_url: str) -> None:
    from lowkiq.console import Console

    runtime = configure(workers=[Orders, Plain])
    runtime.register([Orders, Plain])
    console = Console.from_url(redis_url, redis_timeout=5)
    assert console.worker("Orders").info.concurrency == Orders.concurrency == 100
    assert console.worker("Plain").info.concurrency is None  # a sync worker: threads_per_node
