"""The keeper's periodic duties: a duty that raises on every run is reported and backs off, and never keeps a
server from holding and serving its shards; the configure-time refusals that keep such duties from failing
(a cron rule that never fires) and work from being silently dropped (an ``async def`` where lowkiq would never
await it)."""

from __future__ import annotations

import re
import time

import pytest
import redis
from server_support import APPS, FAST_LEASES, performed_ids, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.server.duties import MAX_BACKOFF, Duties, Duty
from lowkiq.store import membership
from lowkiq.webui import create_app


class Plain(lowkiq.Worker):
    """The failing-duty app's worker of that name (same queue, same shards): the test enqueues into it."""

    shards_count = 2

    def perform(self, payloads_by_id):
        pass


# -- configure ------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["0 0 30 2 *", "0 12 31 4,6,9,11 *", "0 0 31 2 *"])
def test_a_cron_rule_that_never_fires_is_refused_at_configure(redis_url, rule):
    schedule = lowkiq.Schedule("never", Plain, cron=rule)  # the syntax is valid: croniter accepts it
    with pytest.raises(lowkiq.ConfigurationError, match=re.escape(f"schedule 'never': the cron rule '{rule}' never fires")):
        lowkiq.configure(redis_url=redis_url, workers=[Plain], schedules=[schedule])
    lowkiq.runtime._current = None


def test_a_rare_cron_rule_is_accepted(redis_url):
    runtime = lowkiq.configure(redis_url=redis_url, workers=[Plain],
                               schedules=[lowkiq.Schedule("leap-day", Plain, cron="0 0 29 2 *")])
    assert runtime.settings.schedules[0].next_after(time.time()) > time.time()
    lowkiq.runtime._current = None


class AsyncPerformInAChild(lowkiq.Worker):
    isolation = "process"  # a child process has no event loop to await it on (docs/async.md)

    async def perform(self, payloads_by_id):
        pass


class AsyncRetriesExhausted(lowkiq.Worker):
    def perform(self, payloads_by_id):
        pass

    async def retries_exhausted(self, batch):
        pass


class AsyncGeneratorPerform(lowkiq.Worker):
    async def perform(self, payloads_by_id):
        yield None


async def _async_middleware(worker, batch, call_next):
    return call_next()


class _AsyncSubscriber:
    async def __call__(self, event):
        pass


async def _async_hook():
    pass


@pytest.mark.parametrize(("options", "where"), [
    ({"workers": [AsyncPerformInAChild]}, "AsyncPerformInAChild.perform"),
    ({"workers": [AsyncGeneratorPerform]}, "AsyncGeneratorPerform.perform"),
    ({"workers": [AsyncRetriesExhausted]}, "AsyncRetriesExhausted.retries_exhausted"),
    ({"workers": [Plain], "server_middlewares": [_async_middleware]}, r"server_middlewares\[0\]"),
    ({"workers": [Plain], "client_middlewares": [_async_middleware]}, r"client_middlewares\[0\]"),
    ({"workers": [Plain], "subscribers": [_AsyncSubscriber()]}, r"subscribers\[0\]"),
    ({"workers": [Plain], "on_server_init": _async_hook}, "on_server_init"),
])
def test_a_coroutine_where_lowkiq_cannot_await_it_is_refused_at_configure(redis_url, options, where):
    with pytest.raises(lowkiq.ConfigurationError, match=rf"^{where}.* is a coroutine function \(async def\)"):
        lowkiq.configure(redis_url=redis_url, **options)
    assert lowkiq.runtime._current is None  # nothing was configured


def test_a_server_refuses_an_async_generator_perform_at_start_up_instead_of_dropping_its_jobs(tmp_path, redis_url):
    app = tmp_path / "async_app.py"
    app.write_text("import lowkiq\n\n\nclass Orders(lowkiq.Worker):\n    async def perform(self, payloads_by_id):\n"
                   "        yield None\n\n\nlowkiq.configure(workers=[Orders])\n")
    server = start_server(tmp_path, redis_url, app=app)
    assert server.wait(30) != 0
    assert "Orders.perform is a coroutine function (async def)" in server.log()


# -- the duties' runner -----------------------------------------------------------------------


class Counting(Duty):
    def __init__(self, name: str, every: float, fail: bool = False) -> None:
        self.name, self.every, self.fail, self.runs = name, every, fail, 0

    def run(self) -> None:
        self.runs += 1
        if self.fail:
            raise ValueError(f"{self.name} is broken")


def test_a_failing_duty_backs_off_and_the_others_run_on_time():
    now = [0.0]
    broken, fine = Counting("broken", 1.0, fail=True), Counting("fine", 1.0)
    reported = []
    duties = Duties([broken, fine], report=reported.append, clock=lambda: now[0], wall=lambda: 1000.0)
    for _ in range(300):  # five minutes of beats, one a second
        duties.run_due()
        now[0] += 1.0
    assert fine.runs == 300
    # 1, 2, 4, ... seconds apart, then once a minute: reported each time, never silent, never every beat
    assert 7 <= broken.runs <= 12
    assert [f.failures for f in reported] == list(range(1, broken.runs + 1))
    (failure,) = duties.failing()
    assert (failure.duty, failure.error, failure.since) == ("broken", "ValueError: broken is broken", 1000.0)
    assert duties.next_at["broken"] - now[0] <= MAX_BACKOFF
    broken.fail = False
    now[0] = duties.next_at["broken"]
    duties.run_due()
    assert duties.failing() == []


def test_an_outage_met_by_a_duty_is_raised_after_every_duty_had_its_turn():
    class Unreachable(Duty):
        name = "unreachable"

        def run(self) -> None:
            raise redis.ConnectionError("gone")

    fine = Counting("fine", 0.0)
    duties = Duties([Unreachable(), fine])
    with pytest.raises(redis.ConnectionError):
        duties.run_due()
    assert fine.runs == 1 and duties.failing() == []  # an outage is the keeper's to handle, not a duty's fault


# -- a real server ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_duty_that_raises_on_every_run_leaves_the_server_serving_and_is_on_the_servers_page(tmp_path, redis_url, r):
    server = start_server(tmp_path, redis_url, app=APPS / "failing_duty_app.py", env=FAST_LEASES)
    try:
        lowkiq.configure(redis_url=redis_url, workers=[Plain])
        Plain.perform_async([{"id": f"order-{i}", "payload": i} for i in range(20)])
        wait_until(lambda: len(performed_ids(tmp_path, "Plain")) == 20, 20)
        # later jobs too: the server goes on serving while the duty keeps failing
        time.sleep(2)
        Plain.perform_async([{"id": "late", "payload": "after"}])
        wait_until(lambda: "late" in performed_ids(tmp_path, "Plain"), 10)

        def failing() -> list[dict]:
            return [f for m in membership.live(r) for f in m.as_json()["failing_duties"]]

        wait_until(lambda: failing(), 10)
        (failure,) = failing()
        assert failure["duty"] == "schedule_ticks" and failure["error"] == "RuntimeError: the rule exploded"
        assert failure["failures"] >= 1
        client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
        api = client.get("/api/v1/servers").get_json()
        assert api["servers"][0]["failing_duties"][0]["duty"] == "schedule_ticks"
        page = client.get("/servers").get_data(as_text=True)
        assert 'id="failing-duties"' in page and "the rule exploded" in page and "1 duty failing" in page
        log = server.log()
        assert "keeper: duty schedule_ticks failed" in log and "Traceback" in log and "the rule exploded" in log
    finally:
        server.stop()
        lowkiq.runtime._current = None
