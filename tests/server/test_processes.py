"""`lowkiq -r app.py --processes N`: N server processes under one parent share the shards through the
leases; a child killed is restarted; TERM stops them all cleanly; nothing is lost or run twice."""

from __future__ import annotations

import signal
import socket
import time

import psutil
import pytest
from cli_support import one_line_error
from execution_checks import Producer, check
from fault_support import FAST, drain
from server_support import APPS, run_cli, start_server
from timing_support import wait_until

from lowkiq.store import membership

pytestmark = pytest.mark.slow

APP = APPS / "versions_app.py"


def children(pid: int) -> set[int]:
    """The live children of ``pid``; one reaped while they are read (a killed child) is left out."""
    alive = set()
    for child in psutil.Process(pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def serving(r) -> dict[int, set[int]]:
    return {m.pid: set(m.shards.get("Versions", ())) for m in membership.live(r)}


def covered_by(r, pids: set[int], shards: int) -> bool:
    """Every shard served once, by ``pids``, each serving some (the first to start serves them all at first)."""
    held = serving(r)
    return set(held) == pids and all(held.values()) and sorted(s for part in held.values() for s in part) == list(range(shards))


def wait_covered(r, parent, pids: set[int], shards: int, timeout: float) -> None:
    """Until exactly ``pids`` serve every shard once; on a timeout, says who served what and shows the log."""
    try:
        wait_until(lambda: covered_by(r, pids, shards), timeout=timeout)
    except AssertionError:
        tail = "\n".join(parent.log().splitlines()[-80:])
        raise AssertionError(f"children {sorted(pids)} never served the {shards} shards exactly once; "
                             f"live members serve {serving(r)}\n{tail}") from None


def test_two_processes_share_the_shards_survive_a_kill_9_and_stop_on_term(versions, r, redis_url, tmp_path):
    parent = start_server(tmp_path, redis_url, "--processes", "2", "--threads", "2", app=APP, env=FAST)
    producer = Producer(versions, every=0.005)
    try:
        wait_until(lambda: len(children(parent.pid)) == 2, timeout=15)
        first = children(parent.pid)
        wait_covered(r, parent, first, versions.shards_count, timeout=20)
        assert parent.pid not in serving(r)  # the parent serves nothing itself
        producer.start()
        time.sleep(1)
        victim = min(first)
        psutil.Process(victim).send_signal(signal.SIGKILL)
        def replaced() -> set[int] | None:
            now = children(parent.pid)  # read once: the set the condition saw is the one used
            return now if len(now) == 2 and victim not in now else None

        second = wait_until(replaced, timeout=15)
        wait_covered(r, parent, second, versions.shards_count, timeout=20)
        assert "exited with signal SIGKILL" in parent.log() and "restarting it in 1 s" in parent.log()
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        # A kill -9 re-runs its in-flight batch once (at least once), never overlaps a live owner's.
        assert (report.lost, report.overlaps, report.order) == (set(), set(), set()), report
        started = time.monotonic()
        parent.signal(signal.SIGTERM)
        assert parent.wait(30) == 0
        assert time.monotonic() - started < 15
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in second)
        assert membership.live(r) == []  # every child left the membership
    finally:
        producer.stop()
        parent.kill()


def test_a_child_that_cannot_start_stops_the_supervisor_with_status_2(versions, r, redis_url, tmp_path):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        parent = start_server(tmp_path, redis_url, "--processes", "2", "--metrics-port", str(port - 1), app=APP,
                              env=FAST)
        try:
            # The second child's port (port - 1 + 1) is taken: a restart would fail the same way.
            assert parent.wait(30) == 2
            assert "exited with status 2" in parent.log()
        finally:
            parent.kill()


def test_processes_do_not_combine_with_node_numbers(tmp_path, redis_url):
    refused = run_cli(tmp_path, "-r", str(APP), "--processes", "2", "--nodes", "2", "--node-number", "0",
                      env={"LOWKIQ_REDIS_URL": redis_url})
    assert "--processes shares the shards through leases" in one_line_error(refused)
    assert "processes must be a number of server processes 1..64" in one_line_error(
        run_cli(tmp_path, "-r", str(APP), "--processes", "0", env={"LOWKIQ_REDIS_URL": redis_url}))
