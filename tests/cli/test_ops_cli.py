"""`lowkiq stats|servers|jobs|morgue|audit` as an operator runs them, against a real Redis."""

from __future__ import annotations

import json
import time

import pytest
from cli_support import one_line_error
from queue_support import held_lease
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
    """Billing: 5 queued, 3 dead (d0..d2); Mailer: "shared" queued, and "shared" dead in Billing too."""
    runtime = configure(workers=[Billing, Mailer])
    Billing.perform_async([{"id": f"d{i}", "payload": {"n": i}} for i in range(3)] + [{"id": "shared", "payload": 1}])
    q = runtime.queue(Billing)
    for shard in range(Billing.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 100))
        q.fail(held_lease(q, shard), [(j.id, time.time() + 3600) for j in taken.jobs], b"KeyError: 'card'", 25)
    assert runtime.actions(Billing).kill_failed() == 4
    Billing.perform_async([{"id": f"q{i}", "payload": i} for i in range(5)])
    Mailer.perform_async([{"id": "shared", "payload": "hello"}])
    return runtime


def ops(tmp_path, redis_url, *args):
    result = run_cli(tmp_path, *args, "--redis-url", redis_url)
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(tmp_path, redis_url, *args):
    return json.loads(ops(tmp_path, redis_url, *args, "--json"))


def test_stats_and_servers(tmp_path, redis_url, seeded):
    stats = as_json(tmp_path, redis_url, "stats")
    rows = {row["worker"]: row for row in stats["workers"]}
    assert (rows["Billing"]["length"], rows["Billing"]["dead"], rows["Mailer"]["length"]) == (5, 4, 1)
    assert stats["servers"] == 0 and stats["redis"].startswith("redis://127.0.0.1:")
    table = ops(tmp_path, redis_url, "stats").splitlines()
    assert table[0].startswith("Redis: redis://127.0.0.1:") and table[0].endswith(", 0 live servers")
    assert table[1].split() == ["worker", "enqueued", "fresh", "retries", "busy", "dead", "lag", "processed", "failed",
                                "paused"]
    assert table[2].split()[:6] == ["Billing", "5", "5", "0", "0", "4"] and table[2].endswith("  no")
    assert as_json(tmp_path, redis_url, "servers") == {"servers": []}


def test_find_an_id_in_every_worker_and_list_jobs(tmp_path, redis_url, seeded):
    found = as_json(tmp_path, redis_url, "jobs", "find", "shared")["found"]
    assert sorted((f["worker"], f["where"]) for f in found) == [("Billing", "dead"), ("Mailer", "queued")]
    dead = next(f for f in found if f["where"] == "dead")
    assert dead["error"] == "KeyError: 'card'" and dead["payloads"][0][0] == 1
    missing = run_cli(tmp_path, "jobs", "find", "nowhere", "--json", "--redis-url", redis_url)
    assert missing.returncode == 1 and json.loads(missing.stdout) == {"id": "nowhere", "found": []}
    assert missing.stderr == ("lowkiq: no job with id 'nowhere' in any worker (Billing, Mailer): not queued, busy or "
                              "dead\n")
    listed = as_json(tmp_path, redis_url, "jobs", "list", "Billing", "--dead", "--limit", "2")
    assert len(listed["jobs"]) == 2 and all(j["where"] == "dead" for j in listed["jobs"])
    queued = as_json(tmp_path, redis_url, "jobs", "list", "Billing", "--queued")
    assert sorted(j["id"] for j in queued["jobs"]) == [f"q{i}" for i in range(5)]


def test_morgue_actions_count_first_ask_and_are_audited(tmp_path, redis_url, seeded):
    dry = as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--ids", "d0", "d1", "q0", "--dry-run")
    assert dry == {"worker": "Billing", "action": "morgue/requeue", "dry_run": True, "would_touch": 2}
    assert seeded.queries(Billing).morgue_job("d0") is not None  # the dry run touched nothing

    refused = run_cli(tmp_path, "morgue", "requeue", "Billing", "--ids", "d0", "--redis-url", redis_url)
    assert "add --yes to confirm" in one_line_error(refused)

    done = as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--ids", "d0", "d1", "--yes")
    assert done["touched"] == 2
    assert seeded.queries(Billing).morgue_job("d0") is None and seeded.queries(Billing).job("d0") is not None
    deleted = as_json(tmp_path, redis_url, "morgue", "delete", "Billing", "--all", "--yes")
    assert deleted["touched"] == 2

    entries = as_json(tmp_path, redis_url, "audit")
    # An action in chunks (--all, a filter) leaves an entry when it starts and one when it ends.
    assert [(e["action"], e["count"], e["source"], e["scope"]) for e in entries] == [
        ("morgue/delete", 2, "cli", "all"), ("morgue/delete", 0, "cli", "all: started"),
        ("morgue/requeue", 2, "cli", "")]
    assert entries[2]["ids"] == ["d0", "d1"] and entries[0]["who"] and entries[0]["at"] > time.time() - 60


def test_a_filter_lists_and_acts_on_exactly_its_range(tmp_path, redis_url, seeded):
    listed = as_json(tmp_path, redis_url, "jobs", "list", "Billing", "--queued", "--filter", "id", "--min", "q1",
                     "--max", "q3", "--desc")
    assert [j["id"] for j in listed["jobs"]] == ["q3", "q2", "q1"]
    assert listed["filter"] == {"field": "id", "min": "q1", "max": "q3"}
    dead = as_json(tmp_path, redis_url, "jobs", "list", "Billing", "--dead", "--filter", "id", "--max", "d1")
    assert [j["id"] for j in dead["jobs"]] == ["d0", "d1"]

    dry = as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--filter", "id", "--min", "d1", "--max", "d2",
                  "--dry-run")
    assert (dry["would_touch"], dry["filter"]) == (2, {"field": "id", "min": "d1", "max": "d2"})
    refused = run_cli(tmp_path, "morgue", "delete", "Billing", "--filter", "id", "--min", "d1", "--redis-url", redis_url)
    assert "add --yes to confirm" in one_line_error(refused)
    done = as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--filter", "id", "--min", "d1", "--max", "d2",
                   "--yes")
    assert done["touched"] == 2
    q = seeded.queries(Billing)
    assert q.morgue_job("d0") is not None and q.morgue_job("shared") is not None  # outside the range: untouched
    assert q.morgue_job("d1") is None and q.job("d2") is not None
    # A time filter takes a local date, as the console's does; nothing died before 2001.
    old = as_json(tmp_path, redis_url, "morgue", "delete", "Billing", "--filter", "updated_at", "--max",
                  "2001-01-01 00:00", "--yes")
    assert old["touched"] == 0
    [entry, _] = as_json(tmp_path, redis_url, "audit", "--limit", "2")
    assert (entry["action"], entry["count"], entry["scope"]) == ("morgue/delete_matching", 0,
                                                                 f"updated_at from the first to {old['filter']['max']}")


def test_pause_and_resume_are_kept_in_redis_and_audited(tmp_path, redis_url, seeded):
    assert as_json(tmp_path, redis_url, "pause", "Mailer") == {"worker": "Mailer", "paused": True, "changed": True}
    assert as_json(tmp_path, redis_url, "pause", "Mailer")["changed"] is False
    rows = {row["worker"]: row for row in as_json(tmp_path, redis_url, "stats")["workers"]}
    assert rows["Billing"]["paused"] is None
    assert rows["Mailer"]["paused"]["source"] == "cli" and rows["Mailer"]["paused"]["at"] > time.time() - 60
    assert ops(tmp_path, redis_url, "resume", "Mailer") == "Mailer resumed: servers take its jobs again\n"
    assert as_json(tmp_path, redis_url, "resume", "Mailer")["changed"] is False
    entries = as_json(tmp_path, redis_url, "audit", "--limit", "4")
    assert [(e["action"], e["worker"], e["scope"]) for e in entries] == [
        ("resume", "Mailer", "was not paused"), ("resume", "Mailer", "queue Mailer resumed"),
        ("pause", "Mailer", "was paused already"), ("pause", "Mailer", "queue Mailer paused")]


def test_mistakes_are_one_line(tmp_path, redis_url, seeded):
    assert "--filter must be one of id, perform_in, retry_count, got 'updated_at'" in one_line_error(
        run_cli(tmp_path, "jobs", "list", "Billing", "--queued", "--filter", "updated_at", "--redis-url", redis_url))
    assert "--min and --max need --filter FIELD" in one_line_error(
        run_cli(tmp_path, "morgue", "delete", "Billing", "--all", "--min", "1", "--redis-url", redis_url))
    assert "min must be a unix time or a date" in one_line_error(
        run_cli(tmp_path, "jobs", "list", "Billing", "--dead", "--filter", "updated_at", "--min", "yesterday",
                "--redis-url", redis_url))
    assert "no worker 'Nope' in this Redis (known: Billing, Mailer)" in one_line_error(
        run_cli(tmp_path, "jobs", "list", "Nope", "--dead", "--redis-url", redis_url))
    assert "--limit must be 1..1000" in one_line_error(
        run_cli(tmp_path, "jobs", "list", "Billing", "--dead", "--limit", "0", "--redis-url", redis_url))
    unreachable = run_cli(tmp_path, "stats", "--redis-url", "redis://127.0.0.1:1/0")
    assert one_line_error(unreachable).startswith("lowkiq: Redis: ")


def test_redis_url_wins_over_the_app_s_redis_as_for_lowkiq_r(tmp_path, redis_url, seeded):
    # The app configures another Redis (a closed port), and so does the environment.
    (tmp_path / "elsewhere.py").write_text(
        "import lowkiq\n"
        "class Billing(lowkiq.Worker):\n    shards_count = 3\n    def perform(self, batch): pass\n"
        "lowkiq.configure(workers=[Billing], redis_url='redis://127.0.0.1:1/0')\n")
    elsewhere = {"LOWKIQ_REDIS_URL": "redis://127.0.0.1:1/0"}
    stats = json.loads(run_cli(tmp_path, "stats", "--app", "elsewhere.py", "--redis-url", redis_url, "--json",
                               env=elsewhere).stdout)
    assert stats["redis"] == redis_url and [(w["worker"], w["dead"]) for w in stats["workers"]] == [("Billing", 4)]
    deleted = run_cli(tmp_path, "morgue", "delete", "Billing", "--ids", "d0", "--yes", "--json", "--app", "elsewhere.py",
                      "--redis-url", redis_url, env=elsewhere)
    assert json.loads(deleted.stdout)["touched"] == 1
    assert not seeded.queries(Billing).morgue_jobs(["d0"])
    assert not (tmp_path / ".lowkiq").exists()  # no embedded Redis was started on the side


def test_an_id_given_twice_is_counted_once(tmp_path, redis_url, seeded):
    dry = as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--ids", "d0", "d0", "d1", "--dry-run")
    assert dry["would_touch"] == 2
    assert as_json(tmp_path, redis_url, "morgue", "requeue", "Billing", "--ids", "d0", "d0", "--yes")["touched"] == 1
    assert as_json(tmp_path, redis_url, "audit", "--limit", "1")[0]["ids"] == ["d0"]


def test_the_audit_limit_is_checked(tmp_path, redis_url, seeded):
    for limit in ("0", "-3", "100000000"):
        assert "--limit must be 1..1000" in one_line_error(
            run_cli(tmp_path, "audit", "--limit", limit, "--redis-url", redis_url))


def test_errors_with_control_characters_cannot_drive_the_terminal(tmp_path, redis_url, seeded):
    q = seeded.queue(Mailer)
    shard = q.shard_of("shared")
    taken = q.ack_and_take(None, (held_lease(q, shard), 10))
    forged = b"KeyError: \x1b[2J\x1b[31mred\r\nall is well"
    q.fail(held_lease(q, shard), [(j.id, time.time() + 3600) for j in taken.jobs], forged, 25)
    for command in (["jobs", "list", "Mailer", "--queued"], ["jobs", "find", "shared"]):
        shown = ops(tmp_path, redis_url, *command)
        assert "\x1b" not in shown and "\r" not in shown and "all is well" in shown
        assert "\\x1b[2J" in shown


def test_ctrl_d_at_the_prompt_does_nothing_and_says_so(tmp_path, redis_url, seeded):
    import os
    import subprocess

    from server_support import lowkiq_bin

    controller, terminal = os.openpty()  # stdin is a terminal: the command asks
    try:
        process = subprocess.Popen([lowkiq_bin(), "morgue", "delete", "Billing", "--all", "--redis-url", redis_url],
                                   cwd=tmp_path, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        os.write(controller, b"\x04")  # Ctrl-D
        out, err = process.communicate(timeout=30)
    finally:
        os.close(controller)
        os.close(terminal)
    assert "Type yes to go on" in out
    assert process.returncode == 2 and "Traceback" not in err and err.strip().endswith("lowkiq: nothing done")
    assert as_json(tmp_path, redis_url, "stats")["workers"][0]["dead"] == 4


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path, redis_url, seeded):
    import os
    import subprocess

    from server_support import lowkiq_bin

    read_end, write_end = os.pipe()
    os.close(read_end)  # `lowkiq stats | true`, with true already gone
    try:
        process = subprocess.run([lowkiq_bin(), "stats", "--redis-url", redis_url], cwd=tmp_path, stdout=write_end,
                                 stderr=subprocess.PIPE, text=True, timeout=30)
    finally:
        os.close(write_end)
    assert process.returncode == 1 and process.stderr == ""
