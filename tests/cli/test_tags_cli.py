"""`lowkiq jobs tagged TAG` as an operator runs it, against a real Redis (docs/tags.md)."""

from __future__ import annotations

import json

import pytest
from cli_support import one_line_error
from server_support import run_cli

import lowkiq

pytestmark = pytest.mark.slow


class Billing(lowkiq.Worker):
    shards_count = 3

    def perform(self, payloads_by_id):
        pass


class Mailer(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def seeded(configure):
    runtime = configure(workers=[Billing, Mailer])
    Billing.perform_async([{"id": f"b{i}", "tags": ["acct-7", "vip"] if i % 2 else ["acct-7"]} for i in range(5)])
    Mailer.perform_async([{"id": "m1", "tags": ["vip"]}, {"id": "m2"}])
    return runtime


def tagged(tmp_path, redis_url, *args):
    return run_cli(tmp_path, "jobs", "tagged", *args, "--redis-url", redis_url)


def test_jobs_tagged_lists_each_workers_tagged_ids(tmp_path, redis_url, seeded):
    result = tagged(tmp_path, redis_url, "vip", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tag"] == "vip"
    by_worker = {entry["worker"]: entry for entry in data["found"]}
    assert sorted(job["id"] for job in by_worker["Billing"]["jobs"]) == ["b1", "b3"]
    assert by_worker["Mailer"]["jobs"] == [{"id": "m1", "tags": ["vip"], "queued": True, "busy": False,
                                            "dead": False}]
    text = tagged(tmp_path, redis_url, "vip").stdout
    assert "Billing: 2 ids tagged vip" in text and "Mailer: 1 id tagged vip" in text
    assert "acct-7, vip" in text


def test_jobs_tagged_pages_one_worker_with_after(tmp_path, redis_url, seeded):
    seen, after = [], []
    while True:
        result = tagged(tmp_path, redis_url, "acct-7", "--worker", "Billing", "--limit", "2", "--json", *after)
        assert result.returncode == 0, result.stderr
        (entry,) = json.loads(result.stdout)["found"]
        seen += [job["id"] for job in entry["jobs"]]
        if entry["next"] is None:
            break
        after = ["--after", entry["next"]]
    assert sorted(seen) == [f"b{i}" for i in range(5)] and len(seen) == 5
    text = tagged(tmp_path, redis_url, "acct-7", "--worker", "Billing", "--limit", "2").stdout
    assert "for more, add: --worker Billing --after " in text


def test_jobs_tagged_says_when_nothing_carries_the_tag_and_refuses_bad_input(tmp_path, redis_url, seeded):
    result = tagged(tmp_path, redis_url, "nobody")
    assert result.returncode == 1 and "no id tagged 'nobody' in any worker" in result.stderr
    assert "at most 64" in one_line_error(tagged(tmp_path, redis_url, "x" * 65))
    assert "--after goes on in one worker's pages" in one_line_error(tagged(tmp_path, redis_url, "vip", "--after", "0:"))
    assert "not a cursor" in one_line_error(tagged(tmp_path, redis_url, "vip", "--worker", "Mailer", "--after", "7:x"))
