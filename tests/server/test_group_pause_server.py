"""Pausing one group and the day stats with real `lowkiq -r` servers, their execution log and the CLI: a paused
group's ids wait while other groups run, a resume runs them in order; on a Redis Cluster with group limits too.
40 performs of 50 ms show in `lowkiq stats WORKER --day`."""

from __future__ import annotations

import getpass
import json
import time

import pytest
from server_support import records, run_cli, start_server
from test_fairness_limits_server import APP, FAST, limited
from timing_support import wait_until

import lowkiq
from lowkiq.store import audit, day_stats

pytestmark = [pytest.mark.slow]


def cli(tmp_path, url: str, *args: str) -> str:
    result = run_cli(tmp_path, *args, "--redis-url", url)
    assert result.returncode == 0, result.stderr
    return result.stdout


def started(tmp_path, group: str) -> list[dict]:
    return [rec for rec in records(tmp_path, "start") if rec["group"] == group]


def paused_group_waits_then_runs_in_order(tmp_path, url: str, env: dict[str, str]) -> None:
    worker = limited(env)
    lowkiq.configure(redis_url=url, workers=[worker])
    now = time.time()
    worker.perform_async([{"id": f"a{i}", "group": "A", "payload": {"g": "A"}, "perform_in": now - 100 + i}
                          for i in range(12)])
    worker.perform_async([{"id": f"b{i}", "group": "B", "payload": {"g": "B", "sleep": 0.02}} for i in range(12)])
    said = cli(tmp_path, url, "groups", "pause", "Limited", "A")
    assert "group A of Limited paused" in said
    server = start_server(tmp_path, url, "-t", "2", "--poll-interval", "0.2", app=APP, env=env)
    try:
        wait_until(lambda: len(started(tmp_path, "B")) >= 12, timeout=25)
        time.sleep(1.0)  # several polls of every shard: A's ids still wait
        assert started(tmp_path, "A") == []
        listed = {row["group"]: row for row in json.loads(cli(tmp_path, url, "groups", "Limited", "--json"))["groups"]}
        assert listed["A"]["queued"] == 12 and listed["A"]["paused"]["source"] == "cli"
        assert listed["A"]["oldest_wait"] >= 99
        table = cli(tmp_path, url, "groups", "Limited")
        assert "A" in table and "paused" in table.splitlines()[0] and "by " in table
        assert "group A of Limited resumed" in cli(tmp_path, url, "groups", "resume", "Limited", "A")
        wait_until(lambda: len(records(tmp_path, "perform")) >= 24, timeout=25)
    finally:
        server.stop()
    done = records(tmp_path, "perform")
    assert sorted(rec["id"] for rec in done) == sorted([f"a{i}" for i in range(12)] + [f"b{i}" for i in range(12)])
    # in each shard, A's ids ran oldest due first, each after every B id of the test had started
    q = lowkiq.current().queue(worker)
    last_b = max(rec["start"] for rec in started(tmp_path, "B"))
    by_shard: dict[int, list[str]] = {}
    for rec in started(tmp_path, "A"):
        assert rec["start"] > last_b
        by_shard.setdefault(q.shard_of(rec["id"]), []).append(rec["id"])
    for ids in by_shard.values():
        assert ids == sorted(ids, key=lambda i: int(i[1:])), by_shard
    entries = [(e.action, e.who, e.source, e.scope) for e in audit.read(lowkiq.current().client, 10)]
    assert entries[:2] == [("group/resume", getpass.getuser(), "cli", "group A resumed"),
                           ("group/pause", getpass.getuser(), "cli", "group A paused")]


def test_a_paused_groups_ids_wait_while_others_run_and_resume_in_order(configure, tmp_path, redis_url):
    paused_group_waits_then_runs_in_order(tmp_path, redis_url, {**FAST, "APP_SHARDS": "3"})


def test_on_a_cluster_with_group_limits(cluster, tmp_path):
    from cluster_support import covering_queue

    name = covering_queue(cluster, "paused", 6)
    paused_group_waits_then_runs_in_order(tmp_path, cluster.url,
                                          {**FAST, "APP_QUEUE": name, "APP_CONCURRENCY": "1", "APP_SHARDS": "6"})


def test_forty_performs_of_50_ms_show_in_the_day_stats(configure, tmp_path, redis_url):
    env = {**FAST, "APP_SHARDS": "2"}
    worker = limited(env)
    lowkiq.configure(redis_url=redis_url, workers=[worker])
    worker.perform_async([{"id": f"j{i}", "payload": {"g": "", "sleep": 0.05}} for i in range(40)])
    server = start_server(tmp_path, redis_url, "-t", "2", "--poll-interval", "0.2", app=APP, env=env)
    try:
        wait_until(lambda: len(records(tmp_path, "perform")) >= 40, timeout=25)
        day = day_stats.day_of(time.time())
        # the keeper flushes about once a second
        wait_until(lambda: day_stats.read(lowkiq.current().client, "Limited", day).run.count >= 40, timeout=10)
    finally:
        server.stop()
    data = json.loads(cli(tmp_path, redis_url, "stats", "Limited", "--day", day, "--json"))
    assert data["run"]["count"] == 40 and data["wait"]["count"] == 40
    assert 0.025 <= data["run"]["mean"] <= 0.075, data["run"]
    assert sum(b["count"] for b in data["run"]["histogram"]) == 40
    text = cli(tmp_path, redis_url, "stats", "Limited", "--day", day)
    assert f"Limited, {day} (UTC)" in text and "run (start to end): 40 jobs, mean" in text
    assert "≤ 50 ms" in text or "≤ 100 ms" in text
    bad = run_cli(tmp_path, "stats", "Limited", "--day", "2026-02-30", "--redis-url", redis_url)
    assert bad.returncode == 2 and "day must be a UTC date" in bad.stderr
    no_worker = run_cli(tmp_path, "stats", "--day", day, "--redis-url", redis_url)
    assert no_worker.returncode == 2 and "--day needs a worker" in no_worker.stderr
