"""`--cpus`: each server process, every thread of it, held to one CPU of the list; the n-th process of
`--processes N` to the n-th CPU; a CPU the process may not use refused at start with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from cli_support import one_line_error
from execution_checks import Producer, check
from fault_support import FAST, drain
from server_support import APPS, run_cli, start_server
from test_processes import children
from timing_support import wait_until

import lowkiq
from lowkiq.config import build_settings
from lowkiq.options import cpu_list
from lowkiq.server.cpu_pinning import cpu_of
from lowkiq.store import membership

APP = APPS / "versions_app.py"
LINUX = hasattr(os, "sched_getaffinity")
ALLOWED = sorted(os.sched_getaffinity(0)) if LINUX else []
# Holding to one CPU shows only where the process could otherwise run on another.
two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two CPUs this process may use, to see one chosen")
pytestmark = pytest.mark.skipif(not LINUX, reason="CPU affinity is a Linux call (sched_setaffinity)")


def thread_cpus(pid: int) -> list[set[int]]:
    """The CPUs each thread of ``pid`` may run on (Linux holds this per thread); a thread that ends while
    they are read (a server starts short-lived ones) is left out."""
    held = []
    for name in os.listdir(f"/proc/{pid}/task"):
        try:
            held.append(os.sched_getaffinity(int(name)))
        except ProcessLookupError:
            continue
    return held


def test_a_cpu_list_reads_like_linux_cpusets():
    assert cpu_list("0") == (0,)
    assert cpu_list("0-3,6") == (0, 1, 2, 3, 6)
    assert cpu_list("2,0,2,1-2") == (2, 0, 1)  # in the order given, each once
    for bad in ("", "a", "1,", " 1", "3-1", "1-", "-1", "0x1", "5000", "1.0"):
        with pytest.raises(ValueError):
            cpu_list(bad)
    assert [cpu_of((4, 6), n) for n in range(5)] == [4, 6, 4, 6, 4]


@pytest.mark.slow
def test_bad_cpus_name_the_setting(tmp_path):
    with pytest.raises(ValueError, match="LOWKIQ_CPUS"):
        build_settings({}, {"LOWKIQ_CPUS": "0-"})
    with pytest.raises(ValueError, match="cpus must list CPU numbers"):
        lowkiq.configure(workers=[], cpus=[-1], redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(TypeError, match="cpus must be a list"):
        lowkiq.configure(workers=[], cpus="0", redis_url="redis://127.0.0.1:1/0")
    assert build_settings({"cpus": [1, 0]}, {}).cpus == (1, 0)
    refused = run_cli(tmp_path, "-r", str(APP), "--cpus", "zero")
    assert "--cpus" in refused.stderr and "expected CPU numbers" in refused.stderr
    assert refused.returncode == 2


@pytest.mark.slow
@two_cpus
def test_threads_started_before_the_pinning_are_held_too():
    """pin() moves every thread there is, not only the caller: an app may start threads on import."""
    cpu = ALLOWED[-1]
    code = textwrap.dedent(f"""
        import json, os, threading
        from lowkiq.server.cpu_pinning import pin
        started, stop = threading.Event(), threading.Event()
        ids = []
        def wait():
            ids.append(threading.get_native_id())
            started.set()
            stop.wait(10)
        thread = threading.Thread(target=wait)
        thread.start()
        started.wait(10)
        before = os.sched_getaffinity(ids[0])
        pin({cpu})
        after = os.sched_getaffinity(ids[0])
        later = []
        starter = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0)))
        starter.start()
        starter.join()
        stop.set()
        thread.join()
        print(json.dumps([sorted(before), sorted(after), sorted(os.sched_getaffinity(0)), sorted(later[0])]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    before, after, main, later = json.loads(done.stdout)
    assert before == ALLOWED  # the thread was started free to run anywhere
    assert after == main == later == [cpu]  # the thread already there, the caller, a thread started after


@two_cpus
@pytest.mark.slow
def test_a_server_holds_every_thread_to_its_cpu_and_serves(versions, r, redis_url, tmp_path):
    cpu = ALLOWED[-1]
    server = start_server(tmp_path, redis_url, "--cpus", str(cpu), "--threads", "3", app=APP, env=FAST)
    try:
        wait_until(lambda: [m.pid for m in membership.live(r)] == [server.pid], timeout=15)
        held = thread_cpus(server.pid)
        assert len(held) >= 5  # the main thread, 3 processors, the keeper, the waker: all of them
        assert held == [{cpu}] * len(held)
        assert f"held to CPU {cpu}" in server.log()
    finally:
        server.kill()


@two_cpus
@pytest.mark.guarantee
@pytest.mark.slow
def test_each_process_of_processes_takes_the_next_cpu_and_a_held_child_killed_loses_nothing(
        versions, r, redis_url, tmp_path):
    cpus = (ALLOWED[0], ALLOWED[-1])
    parent = start_server(tmp_path, redis_url, "--processes", "2", "--threads", "2", "--cpus", f"{cpus[0]},{cpus[1]}",
                          app=APP, env=FAST)
    producer = Producer(versions, every=0.005)

    def held_children() -> dict[int, set[int]]:
        by_child = {}
        for pid in children(parent.pid):
            held = thread_cpus(pid)
            assert len({frozenset(h) for h in held}) == 1, held  # one CPU for every thread of a child
            by_child[pid] = held[0]
        return by_child

    try:
        wait_until(lambda: len(children(parent.pid)) == 2 and len(membership.live(r)) == 2, timeout=20)
        first = held_children()
        assert sorted(min(h) for h in first.values()) == sorted(cpus)
        assert all(len(h) == 1 for h in first.values())
        assert os.sched_getaffinity(parent.pid) == set(ALLOWED)  # the parent serves nothing: not held
        producer.start()
        time.sleep(1)
        victim = min(first)
        psutil.Process(victim).send_signal(signal.SIGKILL)
        # Its replacement is held to the CPU it had, and the shards are served again. The children are read once
        # per look (read twice, the victim could be listed by the first read and gone from the second), and the
        # live members must be those very children (the victim's entry lives on until its heartbeat expires).
        def replaced() -> bool:
            now = children(parent.pid)
            return len(now) == 2 and victim not in now and {m.pid for m in membership.live(r)} == now

        wait_until(replaced, timeout=20)
        assert sorted(min(h) for h in held_children().values()) == sorted(cpus)
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        # A kill -9 re-runs its in-flight batch once (at least once), never overlaps a live owner's.
        assert (report.lost, report.overlaps, report.order) == (set(), set(), set()), report
    finally:
        producer.stop()
        parent.kill()


@pytest.mark.slow
def test_a_cpu_this_process_may_not_use_is_refused_in_one_line(versions, redis_url, tmp_path):
    refused = run_cli(tmp_path, "-r", str(APP), "--cpus", "4000", env={"LOWKIQ_REDIS_URL": redis_url, **FAST})
    assert refused.returncode == 2
    line = one_line_error(refused)
    assert "cpus: CPU 4000 is not one this process may run on" in line
    named = line[line.index("may run on (") + len("may run on ("):line.rindex(")")]
    listed = cpu_list(named)  # the allowed CPUs, in the notation --cpus takes
    assert sorted(listed) == ALLOWED, line


@pytest.mark.slow
def test_processes_refuse_a_cpu_they_may_not_use_before_any_starts(versions, redis_url, tmp_path):
    refused = run_cli(tmp_path, "-r", str(APP), "--processes", "2", "--cpus", f"{ALLOWED[0]},4000",
                      env={"LOWKIQ_REDIS_URL": redis_url, **FAST})
    assert "cpus: CPU 4000 is not one this process may run on" in one_line_error(refused)
    assert "supervisor" not in refused.stderr  # no child was started to fail on its own
