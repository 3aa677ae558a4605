"""`lowkiq jobs list` sorts as the console's tabs do: dead jobs newest first unless told otherwise, in text
and in --json alike, against a real Redis."""

from __future__ import annotations

import json

import pytest
from cli_support import one_line_error
from server_support import run_cli

import lowkiq

pytestmark = pytest.mark.slow

# The order the jobs died in, a minute apart: neither their ids' order nor its reverse.
DIED = ["c", "a", "e", "b", "d"]


class Graveyard(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def dead(configure, clock):
    """Graveyard: a..e dead, one a minute (c first, d last); q1, q2 queued, q2 due sooner."""
    runtime = configure(workers=[Graveyard])
    Graveyard.perform_async([{"id": job_id, "payload": job_id} for job_id in DIED])
    for job_id in DIED:
        clock.advance(60)
        assert runtime.actions(Graveyard).kill([job_id]) == 1
    Graveyard.perform_async([{"id": "q1", "perform_in": clock() + 20}, {"id": "q2", "perform_in": clock() + 10}])
    return runtime


def listed(tmp_path, redis_url, *args):
    result = run_cli(tmp_path, "jobs", "list", "Graveyard", *args, "--json", "--redis-url", redis_url)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    return [job["id"] for job in data["jobs"]], data["order"]


def test_dead_jobs_list_newest_first_by_default_in_json_and_text(tmp_path, redis_url, dead, clock):
    result = run_cli(tmp_path, "jobs", "list", "Graveyard", "--dead", "--json", "--redis-url", redis_url)
    data = json.loads(result.stdout)
    assert [job["id"] for job in data["jobs"]] == ["d", "b", "e", "a", "c"]
    assert [job["updated_at"] for job in data["jobs"]] == [clock() - 60 * i for i in range(5)]
    assert data["order"] == {"by": "updated_at", "desc": True}
    # --limit keeps the newest, as the dead tab's first page does
    assert listed(tmp_path, redis_url, "--dead", "--limit", "2")[0] == ["d", "b"]
    text = run_cli(tmp_path, "jobs", "list", "Graveyard", "--dead", "--utc", "--redis-url", redis_url).stdout.splitlines()
    assert text[0] == "Graveyard: 5 dead jobs, newest first"
    assert [line.split()[0] for line in text[2:]] == ["d", "b", "e", "a", "c"]


def test_asc_desc_and_filter_choose_the_order_as_the_console_s_sort(tmp_path, redis_url, dead):
    assert listed(tmp_path, redis_url, "--dead", "--asc") == (["c", "a", "e", "b", "d"],
                                                              {"by": "updated_at", "desc": False})
    # by id: ascending unless --desc, as the dead tab sorted by id
    assert listed(tmp_path, redis_url, "--dead", "--filter", "id") == (["a", "b", "c", "d", "e"],
                                                                       {"by": "id", "desc": False})
    assert listed(tmp_path, redis_url, "--dead", "--filter", "id", "--desc", "--max", "d") == (
        ["d", "c", "b", "a"], {"by": "id", "desc": True})
    # the queue still opens soonest due first
    assert listed(tmp_path, redis_url, "--queued") == (["q2", "q1"], {"by": "perform_in", "desc": False})
    assert listed(tmp_path, redis_url, "--queued", "--desc")[0] == ["q1", "q2"]


def test_a_direction_is_refused_where_it_means_nothing(tmp_path, redis_url, dead):
    busy = run_cli(tmp_path, "jobs", "list", "Graveyard", "--busy", "--asc", "--redis-url", redis_url)
    assert busy.returncode == 2 and "--asc" in one_line_error(busy)
    both = run_cli(tmp_path, "jobs", "list", "Graveyard", "--dead", "--asc", "--desc", "--redis-url", redis_url)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
