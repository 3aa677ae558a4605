"""lowkiq imports, is configured and enqueues where POSIX-only modules are missing (Windows); only the parts
that need them (the embedded Redis, the server) say so, plainly, when used.

A subprocess stands for such a platform: before lowkiq is imported, the POSIX-only modules are made
unimportable (``sys.modules[name] = None``) and the POSIX-only signals are taken out of ``signal``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import lowkiq

NOT_POSIX = textwrap.dedent('''
    import os, signal, sys

    for name in ("fcntl", "resource", "pwd", "grp", "termios", "tty", "pty"):
        sys.modules[name] = None
    for name in ("SIGTTIN", "SIGTTOU", "SIGKILL", "SIGALRM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD",
                 "SIGPIPE", "SIGSTOP", "SIGCONT", "ITIMER_REAL", "setitimer", "alarm", "pthread_sigmask"):
        if hasattr(signal, name):
            delattr(signal, name)
    for name in ("fork", "getuid", "killpg", "setsid", "sched_getaffinity", "sched_setaffinity"):
        if hasattr(os, name):
            delattr(os, name)
''')


def run_without_posix(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NOT_POSIX + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)


class Portable(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


def test_import_configure_and_perform_async_need_no_posix_module(redis_url, r, configure):
    done = run_without_posix(f'''
        import json
        import lowkiq

        class Portable(lowkiq.Worker):
            shards_count = 2

            def perform(self, payloads_by_id):
                pass

        lowkiq.configure(redis_url={redis_url!r}, workers=[Portable])
        Portable.perform_async([{{"id": "order-1", "payload": {{"total": 3}}}}, {{"id": "order-2", "payload": 5}}])
        job = lowkiq.current().queries(Portable).job("order-1")
        print(json.dumps([job.id, job.payloads[0][0]]))
    ''')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["order-1", {"total": 3}]
    # Written as any enqueue is: this process reads both jobs back from the same Redis.
    queries = configure(workers=[Portable]).queries(Portable)
    assert [(job.id, [p for p, _ in job.payloads]) for job in queries.jobs(["order-1", "order-2"])] == [
        ("order-1", [{"total": 3}]), ("order-2", [5])]


def test_the_embedded_redis_and_the_server_say_what_the_platform_lacks(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import lowkiq\n")
    done = run_without_posix(f'''
        import lowkiq.cli
        from lowkiq import connection

        try:
            connection.embedded_url({str(tmp_path / "e")!r})
        except lowkiq.EmbeddedRedisError as exc:
            print("embedded:", exc)
        sys.exit(lowkiq.cli.main(["-r", {str(app)!r}]))
    ''')
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("embedded: the embedded Redis needs a POSIX system (file locks, Unix sockets), which this platform is not: "
            "set LOWKIQ_REDIS_URL to a Redis server") in done.stdout
    assert not (tmp_path / "e").exists()
    assert "lowkiq -r needs POSIX signals this platform lacks (SIGTTIN, SIGKILL, SIGALRM)" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
