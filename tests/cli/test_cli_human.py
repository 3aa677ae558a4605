"""The operator commands as people read them: local times (or UTC), readable payloads, tracebacks on their
own lines, dry runs that show what they would touch, a missing id that exits 1, suggestions for a mistyped
command, every command in `lowkiq --help`; and `--json` with times as numbers, as the API gives them."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from queue_support import held_lease
from server_support import run_cli

import lowkiq
from lowkiq import stored_error
from lowkiq.cli import COMMANDS
from lowkiq.cli import ops as ops_cli
from lowkiq.cli.human import Style, duration
from lowkiq.store import registry
from lowkiq.store import schedules as stored_schedules

pytestmark = pytest.mark.slow

# 2026-11-24 03:00:00 UTC: a fixed moment, shown in a zone without daylight saving time.
MOMENT = 1795489200.0
KOLKATA = {"TZ": "Asia/Kolkata"}  # UTC+05:30, named IST


class Ledger(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


TRACEBACK = ('Traceback (most recent call last):\n  File "/srv/app/ledger.py", line 12, in perform\n'
             '    post(entry)\nKeyError: \'account\'')


@pytest.fixture
def seeded(configure, clock):
    """Ledger: "müller" dead with a traceback (payloads with letters beyond ASCII); 12 more dead, d00..d11."""
    clock.now = MOMENT
    runtime = configure(workers=[Ledger])
    Ledger.perform_async([{"id": "müller", "payload": {"name": "Jürgen Müller", "note": "naïve ☃"}, "score": MOMENT},
                          *({"id": f"d{i:02d}", "payload": i} for i in range(12))])
    q = runtime.queue(Ledger)
    taken = q.ack_and_take(None, (held_lease(q, 0), 100))
    q.fail(held_lease(q, 0), [(j.id, MOMENT) for j in taken.jobs], stored_error.pack(b"KeyError: 'account'", TRACEBACK),
           25, now=MOMENT)
    assert runtime.actions(Ledger).kill_failed() == 13
    return runtime


def cli(tmp_path, redis_url, *args, env=None):
    return run_cli(tmp_path, *args, "--redis-url", redis_url, env=env)


def test_times_are_local_with_their_zone_or_utc(tmp_path, redis_url, seeded):
    local = cli(tmp_path, redis_url, "jobs", "list", "Ledger", "--dead", "--filter", "id", "--min", "m", env=KOLKATA)
    assert local.returncode == 0, local.stderr
    assert "2026-11-24 08:30:00 IST" in local.stdout and "1795489200" not in local.stdout
    utc = cli(tmp_path, redis_url, "jobs", "list", "Ledger", "--dead", "--filter", "id", "--min", "m", "--utc",
              env=KOLKATA)
    assert "2026-11-24 03:00:00 UTC" in utc.stdout and "IST" not in utc.stdout
    as_json = json.loads(cli(tmp_path, redis_url, "jobs", "list", "Ledger", "--dead", "--json", env=KOLKATA).stdout)
    assert {job["updated_at"] for job in as_json["jobs"]} == {MOMENT}  # scripts keep unix seconds


def test_a_zone_without_a_name_shows_its_offset():
    import os

    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/Sao_Paulo"  # named "-03" by the zone database
    time.tzset()
    try:
        assert Style().when(MOMENT) == "2026-11-24 00:00:00 -03:00"
        assert Style(utc=True).when(MOMENT) == "2026-11-24 03:00:00 UTC"
        assert Style(utc=True).score(MOMENT + 0.25) == "2026-11-24 03:00:00.250 UTC"
        assert Style().score(7.0) == "7" and Style().score(2.5) == "2.5"  # an app's own scores stay numbers
    finally:
        if saved is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = saved
        time.tzset()
    assert [duration(s) for s in (0, 4.25, 200, 7500, 280000)] == ["0 s", "4.2 s", "3 min 20 s", "2 h 5 min",
                                                                   "3 d 5 h"]


def test_a_job_reads_as_a_card_with_its_payloads_as_written_and_its_traceback_on_its_own_lines(
        tmp_path, redis_url, seeded):
    shown = cli(tmp_path, redis_url, "jobs", "find", "müller", "--utc")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:6] == [
        "Ledger: dead",
        "  id          müller",
        "  dead since  2026-11-24 03:00:00 UTC",
        "  error       KeyError: 'account'",
        "  1 payload, oldest score first:",
        '    2026-11-24 03:00:00.000 UTC  {"name": "Jürgen Müller", "note": "naïve ☃"}',
    ]
    assert lines[6:] == ["  traceback:", "    Traceback (most recent call last):",
                         '      File "/srv/app/ledger.py", line 12, in perform', "        post(entry)",
                         "    KeyError: 'account'"]
    assert "\\u00fc" not in shown.stdout
    found = json.loads(cli(tmp_path, redis_url, "jobs", "find", "müller", "--json").stdout)["found"]
    assert found[0]["traceback"] == TRACEBACK and found[0]["payloads"][0][0]["name"] == "Jürgen Müller"


def test_a_missing_id_exits_1_with_a_line_on_stderr(tmp_path, redis_url, seeded):
    missing = cli(tmp_path, redis_url, "jobs", "find", "nobody")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == "lowkiq: no job with id 'nobody' in any worker (Ledger): not queued, busy or dead\n"


def test_a_dry_run_shows_some_of_the_ids_it_would_touch_and_how_to_confirm(tmp_path, redis_url, seeded):
    dry = cli(tmp_path, redis_url, "morgue", "delete", "Ledger", "--filter", "id", "--min", "d", "--max", "d~",
              "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == ("dry run: would delete 12 dead jobs of Ledger (the dead jobs with id from d to d~); nothing "
                        "touched. Some of them:")
    assert lines[1:12] == [f"  d{i:02d}" for i in range(10)] + ["  and 2 more"]
    assert lines[12].startswith("to do it, within 10 minutes")
    confirm = shlex.split(lines[13])
    assert confirm[:10] == ["lowkiq", "morgue", "delete", "Ledger", "--filter", "id", "--min", "d", "--max", "d~"]
    done = run_cli(tmp_path, *confirm[1:])  # the line as printed, --redis-url included
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("deleted 12 dead jobs of Ledger (the dead jobs with id from d to d~) in ")
    assert seeded.queries(Ledger).morgue_job("müller") is not None

    by_ids = cli(tmp_path, redis_url, "morgue", "requeue", "Ledger", "--ids", "müller", "d00", "--dry-run")
    assert by_ids.stdout.splitlines() == [
        "dry run: would requeue 1 dead job of Ledger (of the 2 ids given, the others are not dead jobs); nothing "
        "touched. They are:", "  müller"]
    as_json = json.loads(cli(tmp_path, redis_url, "morgue", "requeue", "Ledger", "--ids", "müller", "d00",
                             "--dry-run", "--json").stdout)
    assert as_json == {"worker": "Ledger", "action": "morgue/requeue", "dry_run": True, "would_touch": 1}


def test_schedules_list_local_times_and_give_numbers_in_json(tmp_path, redis_url, seeded, r):
    nightly = lowkiq.Schedule("nightly", Ledger, cron="0 3 * * *")
    registry.register(r, [Ledger])
    stored_schedules.register(r, [nightly])
    [listed] = json.loads(cli(tmp_path, redis_url, "schedules", "--json").stdout)
    assert isinstance(listed["next_at"], float) and listed["next_at"] % 86400 == 3 * 3600 and listed["last_at"] is None
    table = cli(tmp_path, redis_url, "schedules", env=KOLKATA).stdout.splitlines()
    assert table[0].split()[:4] == ["schedule", "worker", "rule", "next"]
    assert " 08:30:00 IST " in table[1] and table[1].split()[:2] == ["nightly", "Ledger"]
    paused = cli(tmp_path, redis_url, "schedules", "pause", "nightly")
    assert (paused.returncode, paused.stdout) == (0, "schedule nightly paused\n")
    assert "- (paused)" in cli(tmp_path, redis_url, "schedules").stdout


def test_stats_audit_and_servers_read_as_text(tmp_path, redis_url, seeded):
    assert cli(tmp_path, redis_url, "pause", "Ledger").stdout.startswith("Ledger paused: servers stop taking")
    stats = cli(tmp_path, redis_url, "stats", "--utc").stdout.splitlines()
    assert stats[2].split()[0] == "Ledger" and " since 20" in stats[2] and " UTC by " in stats[2]
    audit = cli(tmp_path, redis_url, "audit", "--utc").stdout.splitlines()
    assert audit[0].split() == ["at", "who", "source", "action", "worker", "count", "scope", "ids"]
    assert " UTC " in audit[1] and " cli " in audit[1] and " pause " in audit[1]
    assert cli(tmp_path, redis_url, "servers").stdout == "no live server\n"


def test_a_mistyped_command_gets_a_suggestion_and_exit_2(tmp_path):
    stat = run_cli(tmp_path, "stat")
    assert stat.returncode == 2 and stat.stdout == ""
    assert stat.stderr.startswith("lowkiq: unknown command 'stat': did you mean 'stats'?")
    assert "lowkiq -r app.py" in run_cli(tmp_path, "app.py").stderr
    nested = run_cli(tmp_path, "jobs", "fnd", "42")
    assert nested.returncode == 2 and nested.stderr.rstrip().endswith("(did you mean 'find'?)")
    assert "did you mean 'requeue'?" in run_cli(tmp_path, "morgue", "reqeue", "W", "--all").stderr


def test_help_lists_every_command(tmp_path):
    shown = run_cli(tmp_path, "--help").stdout
    for name in ("web", *COMMANDS):
        assert f"\n  {name} " in shown, name
    assert "-r APP.py [options]" in shown
    parsed = {a.dest: a for a in ops_cli.parser()._actions}["command"]
    assert set(parsed.choices) == set(COMMANDS)  # the table and the ops parser agree


def test_configure_refuses_a_worker_without_perform(configure):
    class Orders(lowkiq.Worker):
        shards_count = 2

    class Base(lowkiq.Worker):
        def perform(self, payloads_by_id):
            pass

    class Inherits(Base):  # a perform from its base counts
        pass

    with pytest.raises(lowkiq.ConfigurationError, match=r"^Orders has no perform method: define perform\(self, "):
        configure(workers=[Base, Orders])
    assert issubclass(lowkiq.ConfigurationError, lowkiq.LowkiqError) and issubclass(lowkiq.ConfigurationError,
                                                                                    TypeError)
    Orders.perform = "not a method"  # type: ignore[assignment]
    with pytest.raises(lowkiq.ConfigurationError, match="Orders.perform must be a method"):
        configure(workers=[Orders])
    assert configure(workers=[Inherits]).settings.workers == (Inherits,)
