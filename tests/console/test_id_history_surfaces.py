"""Each id's history where operators read it: the job page and the search (an id performed earlier is found), the
JSON API, and `lowkiq jobs history ID`; operators' actions name who acted (docs/history.md)."""

from __future__ import annotations

import json
import re

import pytest
from queue_support import held_lease
from server_support import run_cli
from webui_support import csrf, host_app

import lowkiq

P = "/lowkiq"
API = P + "/api/v1"
XSS = "<script>alert(1)</script>"


class Billing(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


class Mailer(lowkiq.Worker):
    shards_count = 1
    history_length = 0

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def runtime(configure):
    """Billing: "done" performed (then gone), "dead" failed twice with an escaped error and killed by an operator."""
    runtime = configure(workers=[Billing, Mailer])
    Billing.perform_async([{"id": "done", "payload": 1}, {"id": "done", "payload": 2}, {"id": "dead", "payload": 3}])
    q = runtime.queue(Billing)
    for shard in range(Billing.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 10), thread="lowkiq-processor-1")
        failing = [(j.id, runtime.clock() - 1) for j in taken.jobs if j.id == "dead"]
        if failing:
            q.fail(held_lease(q, shard), failing, XSS.encode(), 25)
            q.ack_and_take(None, (held_lease(q, shard), 10))
            q.fail(held_lease(q, shard), failing, XSS.encode(), 25)
        else:
            q.ack_and_take((held_lease(q, shard), [j.id for j in taken.jobs]), None)
    assert runtime.actions(Billing, actor="night-operator").kill(["dead"]) == 1
    Mailer.perform_async([{"id": "quiet", "payload": 1}])
    return runtime


@pytest.fixture
def client(runtime):
    return host_app(P, LOWKIQ_WEB_CURRENT_USER=lambda: "alice").test_client()


def test_the_job_page_of_an_id_performed_earlier_shows_its_history(client):
    page = client.get(P + "/workers/Billing/job", query_string={"id": "done"})
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "No job with this id is queued, in processing or dead: its history is below." in html
    assert html.count('data-kind="performed"') == 1 and html.count('data-kind="taken"') == 1
    text = re.sub(r"<[^>]+>", "", html)
    assert "enqueued (2 versions)" in text and "server tests · thread lowkiq-processor-1" in text


def test_a_dead_jobs_page_lists_every_attempt_escaped_and_who_killed_it(client):
    html = client.get(P + "/workers/Billing/job", query_string={"id": "dead"}).get_data(as_text=True)
    assert html.count('data-kind="failed"') == 2 and "(retry 0)" in html and "(retry 1)" in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "moved to the morgue by an operator, by night-operator" in html


def test_the_search_finds_an_id_by_its_history_alone(client):
    found = client.get(P + "/search", query_string={"id": "done"})
    assert found.status_code == 303 and found.headers["Location"].endswith("/workers/Billing/job?id=done")
    nowhere = client.get(P + "/search", query_string={"id": "never"})
    assert nowhere.status_code == 404 and "no worker's history holds it" in nowhere.get_data(as_text=True)


def test_the_api_gives_the_history_with_its_bounds(client):
    reply = client.get(API + "/workers/Billing/job/history", query_string={"id": "dead", "limit": "2"})
    assert reply.status_code == 200
    body = reply.get_json()
    assert [e["kind"] for e in body["events"]] == ["killed", "failed"] and not body["complete"]
    assert body["events"][0]["actor"] == "night-operator" and body["events"][1]["error"] == XSS
    everything = client.get(API + "/workers/Billing/job/history", query_string={"id": "dead"}).get_json()
    assert [e["kind"] for e in reversed(everything["events"])] == [
        "enqueued", "taken", "failed", "taken", "failed", "killed"] and everything["complete"]
    for bad in ("0", "1001", "x", "-1"):
        refused = client.get(API + "/workers/Billing/job/history", query_string={"id": "dead", "limit": bad})
        assert refused.status_code == 400 and "limit" in refused.get_json()["error"]
    assert client.get(API + "/workers/Billing/job/history").status_code == 400
    assert client.get(API + "/workers/Nobody/job/history", query_string={"id": "x"}).status_code == 404
    # a worker that keeps no history answers an empty one
    quiet = client.get(API + "/workers/Mailer/job/history", query_string={"id": "quiet"}).get_json()
    assert quiet["events"] == [] and quiet["complete"]


def test_a_console_action_names_the_operator_in_the_history(client, runtime):
    Billing.perform_async([{"id": "later", "payload": 1, "perform_in": runtime.clock() + 3600}])
    token = csrf(client, P + "/workers/Billing/enqueued")
    done = client.post(P + "/workers/Billing/enqueued/retry_now", data={"csrf_token": token, "id": "later"})
    assert done.status_code in (302, 303), done.get_data(as_text=True)[:300]
    newest = runtime.histories(Billing).of("later").events[0]
    assert (newest.kind, newest.actor) == ("performed_now", "alice")


@pytest.mark.slow
def test_the_cli_prints_the_history_for_people_and_scripts(tmp_path, redis_url, runtime):
    text = run_cli(tmp_path, "jobs", "history", "dead", "--redis-url", redis_url, "--utc")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "Billing · id dead · shard 1" or lines[0].startswith("Billing · id dead")
    events = [line for line in lines if " UTC  " in line]
    assert [line.split("  ", 1)[1].split(" (")[0].split(",")[0] for line in events] == [
        "enqueued", "taken", "failed", "taken", "failed", "moved to the morgue by an operator"]
    assert "\\x1b" not in text.stdout and "<script>alert(1)</script>" in text.stdout  # a terminal shows it as text
    as_json = json.loads(run_cli(tmp_path, "jobs", "history", "dead", "--json", "--redis-url", redis_url).stdout)
    assert as_json["history"][0]["worker"] == "Billing" and as_json["history"][0]["events"][0]["kind"] == "killed"
    missing = run_cli(tmp_path, "jobs", "history", "never", "--redis-url", redis_url)
    assert missing.returncode == 1 and "no event of id 'never'" in missing.stderr
    only = run_cli(tmp_path, "jobs", "history", "done", "--worker", "Mailer", "--redis-url", redis_url)
    assert only.returncode == 1 and "Mailer's history" in only.stderr


class Batchy(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


def test_the_job_page_links_batch_mates_and_names_the_id_a_partial_failure_raised(configure):
    runtime = configure(workers=[Batchy])
    hostile = "m<b>1</b>"
    Batchy.perform_async([{"id": i, "payload": 1} for i in ("calm", hostile, "m3")])
    q = runtime.queue(Batchy)
    lease = held_lease(q, 0)
    q.ack_and_take(None, (lease, 10))
    q.fail(lease, [(hostile, 0.0)], b"", 5, errors={hostile: b"KeyError: 'to'"}, acked=["calm", "m3"])
    client = host_app().test_client()
    html = client.get(P + "/workers/Batchy/job", query_string={"id": "calm"}).get_data(as_text=True)
    assert hostile not in html
    raised = html.split("data-raised>")[1].split("</div>")[0]
    assert raised.startswith('raised by <a href="/lowkiq/workers/Batchy/job?id=m%3Cb%3E1%3C/b%3E">m&lt;b&gt;1&lt;/b&gt;</a>')
    batch = html.split("data-batch>")[1].split("</div>")[0]
    assert 'href="/lowkiq/workers/Batchy/job?id=m3">m3</a>' in batch
    mine = client.get(P + "/workers/Batchy/job", query_string={"id": hostile}).get_data(as_text=True)
    assert "it raised this error itself (PartialFailure)" in mine and "raised by this id (PartialFailure)" in mine
    out = run_cli_history(runtime, hostile)
    assert "raised by this id (PartialFailure)" in out


def run_cli_history(runtime, job_id: str) -> str:
    from lowkiq.cli.human import Style
    from lowkiq.cli.id_history import text
    from lowkiq.console import Console, histories

    c = Console.from_url(runtime.redis_url, redis_timeout=5)
    shown = histories.search(c, job_id)
    return text([s.as_json() for s in shown], Style())
