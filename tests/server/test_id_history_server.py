"""Each id's history written by real server processes: every attempt with its error and where it ran, and a
kill -9 mid-batch told as what it was (docs/history.md)."""

from __future__ import annotations

import itertools
import signal

import pytest
from server_support import FAST_LEASES, import_app, queue_empty, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store import membership

pytestmark = [pytest.mark.slow]



@pytest.fixture
def app(configure):
    module = import_app()
    configure(workers=list(module.WORKERS.values()))
    return module


def test_every_attempt_of_a_dying_job_is_in_its_history_with_its_server_and_error(app, r, redis_url, tmp_path):
    app.Flaky.perform_async([{"id": "f1", "payload": "v1"}])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env={"APP_WORKERS": "Flaky"})
    try:
        wait_until(lambda: records(tmp_path, "exhausted"), timeout=20)
        (member,) = membership.live(r)
        events = list(reversed(lowkiq.current().histories(app.Flaky).of("f1").events))
        assert [e.kind for e in events] == ["enqueued"] + ["taken", "failed"] * 4 + ["morgued"]
        failures = [e for e in events if e.kind == "failed"]
        assert [e.retry_count for e in failures] == [0, 1, 2, 3]
        assert all(e.error == "ValueError: boom f1" and "ValueError" in (e.traceback or "") for e in failures)
        assert {e.server for e in events[1:]} == {member.id}
        assert all(e.thread for e in events[1:])
        # each attempt's time: retry_in(c) = 0.3 (c + 1) s apart, by Redis time
        taken = [e.at for e in events if e.kind == "taken"]
        assert all(later - earlier >= 0.25 for earlier, later in itertools.pairwise(taken))
        assert len(records(tmp_path, "attempt")) == 4
        assert server.stop() == 0
    finally:
        server.kill()


def test_a_kill_9_mid_batch_shows_as_a_restore_by_the_next_server_then_one_perform(app, r, redis_url, tmp_path):
    ids = [f"s{i}" for i in range(4)]
    app.Slow.perform_async([{"id": i, "payload": i} for i in ids])
    env = {"APP_WORKERS": "Slow", "APP_SLOW_SECONDS": "1.5", **FAST_LEASES}
    first = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=env, name="first")
    try:
        wait_until(lambda: records(tmp_path, "start"))
        wait_until(lambda: membership.live(r))
        first_id = membership.live(r)[0].id
        first.process.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    in_flight = sorted({i for rec in records(tmp_path, "start") for i in rec["batch"]})
    second = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=env, name="second")
    try:
        wait_until(lambda: {i for rec in records(tmp_path, "done") for i in rec["batch"]} == set(ids), timeout=20)
        wait_until(lambda: queue_empty(r, app.Slow))
        second_id = next(m.id for m in membership.live(r) if m.id != first_id)
        histories = lowkiq.current().histories(app.Slow)
        for job_id in in_flight:
            events = list(reversed(histories.of(job_id).events))
            kinds = [e.kind for e in events]
            assert kinds == ["enqueued", "taken", "restored", "taken", "performed"], (job_id, kinds)
            assert events[1].server == first_id and events[2].server == second_id
            assert f"{first_id} stopped renewing" in (events[2].reason or "")
            assert events[3].server == events[4].server == second_id
            # the new holder's fencing token is above the dead one's
            assert int(events[3].fencing_token.split(":")[1]) > int(events[1].fencing_token.split(":")[1])
        # the execution log: each id done once, after the takeover
        done = [i for rec in records(tmp_path, "done") for i in rec["batch"]]
        assert sorted(done) == sorted(ids)
        assert second.stop() == 0
    finally:
        second.kill()
