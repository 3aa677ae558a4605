"""The app of the "keeping ordered work flowing" tests: one worker whose isolation, time limit and morgue
policy come from the environment, and payloads that misbehave on demand.

Environment: APP_ISOLATION ("thread"), APP_TIME_LIMIT, APP_GRACE, APP_MORGUE ("oldest_payload"),
APP_BATCH_SIZE (1), APP_MAX_RETRY (5), APP_RETRY_IN (0.2 s), APP_STOP_PARENT_ONCE (a file name in
APP_RECORD_DIR: the first child process to load this app creates it and stops its server with SIGSTOP,
between the server's take of a batch and its hand-off to that fresh child). Payloads: {"loop": true}
spins in pure Python; {"hold_gil": true} loops in C code that never lets the GIL go (no other thread
of its process runs meanwhile); {"sleep": s}; {"exit": true} calls os._exit; {"fail_file": name}
raises while that file exists in APP_RECORD_DIR; {"partial": [ids]} raises PartialFailure for those
ids on the first attempt only. Each perform records "start" (with its process's parent, and whether
the process that last started this id is still alive: a killed child must be reaped before its id
runs again) and, when it returns, "perform".

Process isolation's escapes (in a child only): {"hang_with_children": name} starts a subprocess that
ignores SIGTERM, one that holds the child's reply pipe (passed explicitly, as a library's own fork
would keep it) and a fork of the child, writes their pids and its own to the file ``name``, then
sleeps; {"exit_leaving_pipe": name} starts the pipe holder and the fork, writes the pids, then exits;
{"check_pids": name} records "pids": which of the pids in ``name`` still run (a zombie does not);
{"signals_probe": true} records "signals": the signals a command it runs ignores, and the handlers a
fork of it has. APP_CHILD_IMPORT_SECONDS: a child takes that long to load this app (heavy imports);
APP_MAX_BATCHES: max_batches_per_child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from recorder import record

import lowkiq

RECORDS = os.environ.get("APP_RECORD_DIR", ".")
LIMIT = os.environ.get("APP_TIME_LIMIT")
STOP_PARENT_ONCE = os.environ.get("APP_STOP_PARENT_ONCE")


def _in_a_child() -> bool:
    main = sys.modules.get("__main__")
    return getattr(getattr(main, "__spec__", None), "name", None) == "lowkiq.server.child"


if STOP_PARENT_ONCE and _in_a_child():
    try:
        with open(os.path.join(RECORDS, STOP_PARENT_ONCE), "x") as marker:  # only the first child
            marker.write(str(os.getpid()))
    except FileExistsError:
        pass
    else:
        os.kill(os.getppid(), signal.SIGSTOP)


if _in_a_child() and os.environ.get("APP_CHILD_IMPORT_SECONDS"):
    time.sleep(float(os.environ["APP_CHILD_IMPORT_SECONDS"]))


def _running(pid: int) -> bool:
    """Runs on: not gone, and not a zombie (killed, waiting for a parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _escapes(name: str, *, ignoring_sigterm: bool) -> None:
    """Processes a perform leaves behind, their pids (and this child's) written to ``name``."""
    sleeper = "import signal, time\nif {!r}: signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)"
    pids = [os.getpid()]
    if ignoring_sigterm:
        pids.append(subprocess.Popen([sys.executable, "-c", sleeper.format(True)]).pid)
    reply_fd = int(sys.argv[5])  # python -m lowkiq.server.child APP WORKER PARENT REQUESTS REPLIES
    pids.append(subprocess.Popen([sys.executable, "-c", sleeper.format(False)], pass_fds=(reply_fd,)).pid)
    forked = os.fork()
    if forked == 0:
        time.sleep(3600)
        os._exit(0)
    pids.append(forked)
    time.sleep(0.5)  # the interpreters started above are past their own signal setup
    with open(os.path.join(RECORDS, name), "w") as f:
        json.dump(pids, f)


def _signals_probe() -> dict[str, object]:
    command = subprocess.Popen(["sleep", "30"])
    with open(f"/proc/{command.pid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigIgn:"))
    command.kill()
    command.wait()
    read, write = os.pipe()
    forked = os.fork()
    if forked == 0:
        handlers = {"SIGTERM": signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
                    "SIGINT": signal.getsignal(signal.SIGINT) is signal.default_int_handler}
        os.write(write, json.dumps(handlers).encode())
        os._exit(0)
    os.close(write)
    fork = json.loads(os.read(read, 1000))
    os.close(read)
    os.waitpid(forked, 0)
    ignored = [sig.name for sig in (signal.SIGINT, signal.SIGTERM) if mask >> (sig - 1) & 1]
    return {"command_ignores": ignored, "fork_defaults": fork}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # a zombie (killed, not reaped) still answers
    except ProcessLookupError:
        return False
    return True


class Flow(lowkiq.Worker):
    shards_count = 1
    batch_size = int(os.environ.get("APP_BATCH_SIZE", "1"))
    max_retry_count = int(os.environ.get("APP_MAX_RETRY", "5"))
    isolation = os.environ.get("APP_ISOLATION", "thread")
    time_limit = float(LIMIT) if LIMIT else None
    time_limit_grace = float(os.environ.get("APP_GRACE", "5"))
    morgue_policy = os.environ.get("APP_MORGUE", "oldest_payload")
    max_batches_per_child = int(os.environ["APP_MAX_BATCHES"]) if os.environ.get("APP_MAX_BATCHES") else None

    def retry_in(self, retry_count: int) -> float:
        return float(os.environ.get("APP_RETRY_IN", "0.2"))

    def perform(self, payloads_by_id):
        start = time.time()
        previous = {}
        for job_id in payloads_by_id:
            marker = os.path.join(RECORDS, f"pid-{job_id}")
            if os.path.exists(marker):
                with open(marker) as f:
                    pid = int(f.read())
                previous[job_id] = pid != os.getpid() and _alive(pid)
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
        record("start", worker="Flow", batch=payloads_by_id, start=start, parent=os.getppid(), previous_alive=previous,
               time_left=lowkiq.context().time_left())
        failures = {}
        for job_id, payloads in payloads_by_id.items():
            for payload in payloads:
                if payload.get("loop"):
                    n = 0
                    while True:
                        n += 1
                if payload.get("hold_gil"):
                    sum(range(10**15))  # one C call: no bytecode runs until it returns
                if payload.get("sleep"):
                    time.sleep(payload["sleep"])
                if payload.get("exit"):
                    os._exit(3)
                if payload.get("hang_with_children"):
                    _escapes(payload["hang_with_children"], ignoring_sigterm=True)
                    time.sleep(3600)
                if payload.get("exit_leaving_pipe"):
                    _escapes(payload["exit_leaving_pipe"], ignoring_sigterm=False)
                    os._exit(3)
                if payload.get("check_pids"):
                    with open(os.path.join(RECORDS, payload["check_pids"])) as f:
                        record("pids", worker="Flow", running={pid: _running(pid) for pid in json.load(f)})
                if payload.get("signals_probe"):
                    record("signals", worker="Flow", **_signals_probe())
                name = payload.get("fail_file")
                if name and os.path.exists(os.path.join(RECORDS, name)):
                    raise ValueError(f"{job_id} fails while {name} exists")
                for bad in payload.get("partial", []):
                    done = os.path.join(RECORDS, f"partial-{bad}")
                    if not os.path.exists(done):
                        open(done, "w").close()
                        failures[bad] = KeyError(bad)
        if failures:
            raise lowkiq.PartialFailure(failures)
        record("perform", worker="Flow", batch=payloads_by_id, start=start, end=time.time())


lowkiq.configure(workers=[Flow])
