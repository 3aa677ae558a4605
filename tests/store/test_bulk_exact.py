"""A filter-scoped bulk action touches the jobs its confirmation counted and no others: not the jobs that
came to match after the count (console, JSON API, CLI); a confirmation is used once and expires."""

from __future__ import annotations

import json
import re

import pytest
from server_support import run_cli
from webui_support import OrdersWorker, counts, csrf, make_dead

from lowkiq.store import audit, confirmations

W = "/lowkiq/workers/OrdersWorker"
API = "/lowkiq/api/v1/workers/OrdersWorker"


def dead_ids(rt) -> set[str]:
    return {j.id for j in rt.queries(OrdersWorker).morgue("id", limit=1000).rows}


def test_the_console_deletes_what_it_counted_not_what_matched_after(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"mail-{i:03}"} for i in range(10)])
    listing = W + "/morgue?order_by=id&min=mail-&max=mail-~"
    token = csrf(client, listing)
    form = {"csrf_token": token, "next": listing, "order_by": "id", "min": "mail-", "max": "mail-~"}
    asked = client.post(W + "/morgue/delete_matching", data=form)
    assert asked.status_code == 200 and "Delete 10 dead jobs for good?" in asked.get_data(as_text=True)
    confirm = re.search(r'name="confirm" value="([^"]+)"', asked.get_data(as_text=True)).group(1)
    make_dead(runtime, OrdersWorker, [{"id": f"mail-{i:03}"} for i in range(10, 25)])  # match only from now on
    done = client.post(W + "/morgue/delete_matching", data={**form, "confirm": confirm})
    assert done.status_code == 303
    assert dead_ids(runtime) == {f"mail-{i:03}" for i in range(10, 25)}
    assert "Deleted 10 dead jobs (id from mail- to mail-~)." in client.get(listing).get_data(as_text=True)
    again = client.post(W + "/morgue/delete_matching", data={**form, "confirm": confirm})
    assert again.status_code == 303
    assert "Nothing done: this confirmation token was already used" in client.get(listing).get_data(as_text=True)
    assert len(dead_ids(runtime)) == 15


def test_the_api_counts_then_acts_on_exactly_those_and_says_what_it_skipped(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"a{i:02}"} for i in range(20)])
    body = {"action": "requeue", "order_by": "id", "min": "a00", "max": "a19"}
    dry = client.post(API + "/morgue/matching", json={**body, "dry_run": True})
    assert dry.status_code == 200, dry.json
    assert dry.json["count"] == 20 and dry.json["sample"] == [f"a{i:02}" for i in range(10)]
    assert dry.json["expires_in"] == confirmations.TTL_SECONDS
    assert counts(runtime, OrdersWorker) == (0, 20)  # a dry run touches nothing
    make_dead(runtime, OrdersWorker, [{"id": f"a{i:02}"} for i in range(20, 27)] + [{"id": "a05x"}])
    runtime.actions(OrdersWorker).morgue_delete(["a03", "a04"])  # counted, gone since
    done = client.post(API + "/morgue/matching", json={**body, "confirm": dry.json["confirm"]})
    assert done.status_code == 200, done.json
    assert done.json == {"touched": 18, "counted": 20, "skipped": 2}
    assert dead_ids(runtime) == {f"a{i:02}" for i in range(20, 27)} | {"a05x"}
    entry = audit.read(runtime.client)[0]
    assert (entry.source, entry.action, entry.count) == ("api", "morgue/requeue_matching", 18)


def test_a_counted_job_that_no_longer_matches_the_filter_is_left_alone(client, runtime):
    now = runtime.clock()
    OrdersWorker.perform_async([{"id": f"j{i}", "perform_in": now + 100 + i} for i in range(6)])
    body = {"action": "perform_now", "order_by": "perform_in", "min": now + 100, "max": now + 105}
    dry = client.post(API + "/enqueued/matching", json={**body, "dry_run": True})
    assert dry.json["count"] == 6
    runtime.actions(OrdersWorker).perform_now(["j0", "j1"])  # now due: outside the filter counted
    done = client.post(API + "/enqueued/matching", json={**body, "confirm": dry.json["confirm"]})
    assert done.json == {"touched": 4, "counted": 6, "skipped": 2}


@pytest.mark.slow
def test_a_token_is_single_use_expires_and_confirms_only_its_own_action(client, runtime, monkeypatch):
    make_dead(runtime, OrdersWorker, [{"id": f"t{i}"} for i in range(3)])
    body = {"action": "delete", "order_by": "id"}
    token = client.post(API + "/morgue/matching", json={**body, "dry_run": True}).json["confirm"]

    other = client.post(API + "/morgue/matching", json={**body, "action": "requeue", "confirm": token})
    assert other.status_code == 409 and other.json["reason"] == "mismatch" and "'delete'" in other.json["error"]
    narrower = client.post(API + "/morgue/matching", json={**body, "min": "t1", "confirm": token})
    assert narrower.status_code == 409 and narrower.json["reason"] == "mismatch"
    assert counts(runtime, OrdersWorker) == (0, 3)  # refusals touch nothing, and leave the token usable

    assert client.post(API + "/morgue/matching", json={**body, "confirm": token}).json["touched"] == 3
    reused = client.post(API + "/morgue/matching", json={**body, "confirm": token})
    assert reused.status_code == 409 and reused.json["reason"] == "used" and "already used" in reused.json["error"]

    unknown = client.post(API + "/morgue/matching", json={**body, "confirm": "1700000000000-" + "A" * 22})
    assert unknown.status_code == 409 and unknown.json["reason"] == "expired"  # issued long ago, by its stamp
    forged = client.post(API + "/morgue/matching", json={**body, "confirm": "not a token"})
    assert forged.status_code == 404 and forged.json["reason"] == "unknown"

    monkeypatch.setattr(confirmations, "TTL_SECONDS", 1)
    make_dead(runtime, OrdersWorker, [{"id": "late"}])
    token = client.post(API + "/morgue/matching", json={**body, "dry_run": True}).json["confirm"]
    import time

    time.sleep(1.1)
    expired = client.post(API + "/morgue/matching", json={**body, "confirm": token})
    assert expired.status_code == 409 and expired.json["reason"] == "expired" and "expired" in expired.json["error"]
    assert counts(runtime, OrdersWorker) == (0, 1)


def test_the_api_refuses_bad_bodies_with_what_is_wrong(client, runtime):
    url = API + "/morgue/matching"
    assert "dry_run" in client.post(url, json={"action": "delete"}).json["error"]
    assert "not both" in client.post(url, json={"action": "delete", "dry_run": True, "confirm": "x"}).json["error"]
    assert "requeue, delete" in client.post(url, json={"action": "kill", "dry_run": True}).json["error"]
    assert "unknown fields ['ids']" in client.post(url, json={"action": "delete", "ids": [], "dry_run": True}).json["error"]
    assert client.post(API + "/enqueued/matching", json={"action": "requeue", "dry_run": True}).status_code == 400
    assert client.post(API + "/busy/matching", json={"action": "delete", "dry_run": True}).status_code == 404


@pytest.mark.slow
def test_the_cli_confirms_the_count_of_its_dry_run(tmp_path, runtime, redis_url):
    make_dead(runtime, OrdersWorker, [{"id": f"c{i:02}"} for i in range(20)])
    env = {"LOWKIQ_REDIS_URL": redis_url}

    def cli(*args: str) -> dict:
        done = run_cli(tmp_path, "morgue", "delete", "OrdersWorker", "--json", *args, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    dry = cli("--filter", "id", "--min", "c00", "--max", "c99", "--dry-run")
    assert dry["would_touch"] == 20 and dry["sample"][:2] == ["c00", "c01"]
    make_dead(runtime, OrdersWorker, [{"id": f"c{i:02}"} for i in range(20, 27)])
    done = cli("--filter", "id", "--min", "c00", "--max", "c99", "--confirm", dry["confirm"])
    assert (done["touched"], done["counted"], done["skipped"]) == (20, 20, 0)
    assert dead_ids(runtime) == {f"c{i:02}" for i in range(20, 27)}
    reused = run_cli(tmp_path, "morgue", "delete", "OrdersWorker", "--filter", "id", "--min", "c00", "--max", "c99",
                     "--confirm", dry["confirm"], env=env)
    assert reused.returncode == 2 and "already used" in reused.stderr
    everything = cli("--all", "--yes")
    assert everything["touched"] == 7 and counts(runtime, OrdersWorker) == (0, 0)
