"""A schedule's last runs on the schedules page, read from its id's history: each tick's due time, when it was
enqueued and performed, how it ended, linked to the job page and its history; "Run now" names the run it
enqueued; cron rules read in words beside the raw rule."""

from __future__ import annotations

import re
import time

import pytest
from queue_support import held_lease
from webui_support import OrdersWorker, csrf, host_app

import lowkiq
from lowkiq.serializers import dump_json
from lowkiq.store import lua, schedules
from lowkiq.webui.formatting import absolute

S = "/lowkiq/schedules"
SYNC = lowkiq.Schedule("sync", OrdersWorker, every=30, id="sync-id")
NIGHTLY = lowkiq.Schedule("nightly", OrdersWorker, cron="0 3 * * *", timezone="Europe/Berlin")


@pytest.fixture
def runtime(configure):
    runtime = configure(workers=[OrdersWorker], schedules=[SYNC, NIGHTLY])
    runtime.clock = time.time  # the ticks are Redis time: the queue takes them by the same clock
    return runtime


def perform(runtime, error: bytes | None = None) -> None:
    """The sync job's shard takes it, then acknowledges it (or fails it with ``error``)."""
    q = runtime.queue(OrdersWorker)
    lease = held_lease(q, q.shard_of("sync-id"))
    taken = q.ack_and_take(None, (lease, 10))
    assert [j.id for j in taken.jobs] == ["sync-id"]
    if error is None:
        q.ack_and_take((lease, ["sync-id"]), None)
    else:
        q.fail(lease, [("sync-id", time.time() + 600)], error, 25)


def runs(html: str, name: str) -> list[str]:
    part = html.split(f'data-runs="{name}"')[1].split("</table>")[0]
    return re.findall(r'data-run-outcome="([^"]+)"', part)


def test_the_last_runs_say_when_each_tick_was_due_enqueued_performed_and_how_it_ended(runtime, r):
    first = SYNC.next_after(time.time() - 120)
    lua.run(r, *schedules.tick_call(SYNC, [first], 0.0, dump_json))
    perform(runtime)
    lua.run(r, *schedules.tick_call(SYNC, [first + 30], 0.0, dump_json))
    perform(runtime, b"RuntimeError: upstream <down>")
    html = host_app().test_client().get(S).get_data(as_text=True)
    assert runs(html, "sync") == ["failed (retry 0), retries later", "performed"]
    part = html.split('data-runs="sync"')[1].split("</table>")[0]
    assert 'href="/lowkiq/workers/OrdersWorker/job?id=sync-id#history"' in part
    assert "RuntimeError: upstream &lt;down&gt;" in part  # escaped
    assert absolute(first) in part and absolute(first + 30) in part  # each run's tick
    assert "No run in its id's history" in html.split('data-runs="nightly"')[1]


def test_run_now_names_its_run_with_a_link_to_its_job_and_history(runtime, r):
    client = host_app().test_client()
    done = client.post(S + "/sync/run", data={"csrf_token": csrf(client, S)})
    assert done.status_code == 303 and done.headers["Location"].endswith("/lowkiq/schedules?ran=sync")
    html = client.get(done.headers["Location"]).get_data(as_text=True)
    ran = html.split('id="ran"')[1].split("</div>")[0]
    assert 'href="/lowkiq/workers/OrdersWorker/job?id=sync-id" id="ran-job"' in ran
    assert runs(html, "sync") == ["queued"]  # the run shows at once, before any server takes it
    perform(runtime)
    assert runs(client.get(S).get_data(as_text=True), "sync") == ["performed"]
    assert 'id="ran"' not in client.get(S + "?ran=nope").get_data(as_text=True)


def test_the_page_refreshes_itself_and_reads_cron_in_words(runtime, r):
    html = host_app().test_client().get(S).get_data(as_text=True)
    assert 'id="live" data-live hx-get="/lowkiq/schedules"' in html
    assert "every day at 03:00 Europe/Berlin" in html and "<code>0 3 * * *</code> (Europe/Berlin)" in html


def test_a_read_only_console_shows_runs_but_no_action(runtime, r):
    client = host_app(LOWKIQ_WEB_READONLY=True).test_client()
    lua.run(r, *schedules.tick_call(SYNC, [SYNC.next_after(time.time() - 60)], 0.0, dump_json))
    html = client.get(S).get_data(as_text=True)
    assert runs(html, "sync") == ["queued"] and "Run now" not in html and "<form" not in html.split("<main")[1]
