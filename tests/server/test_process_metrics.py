"""A real `lowkiq -r` process serves its own Prometheus metrics on --metrics-port."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from cli_support import one_line_error
from prometheus_client.parser import text_string_to_metric_families
from prometheus_support import readme_metric_names, served_names
from redis_server import free_port
from server_support import import_app, run_cli, start_server
from timing_support import wait_until

pytestmark = pytest.mark.slow


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_performs_failures_the_morgue_and_leases_are_counted(tmp_path, configure, redis_url):
    app = import_app()
    configure(workers=[app.Recorder, app.Flaky])
    port = free_port()
    server = start_server(tmp_path, redis_url, "--metrics-port", str(port), env={"APP_SLOW_SECONDS": "0"})
    try:
        wait_until(lambda: _answers(port), timeout=15)
        app.Recorder.perform_async([{"id": f"r{i}", "payload": i} for i in range(12)])
        app.Flaky.perform_async([{"id": "f1", "payload": 1}])
        count = lambda name, **labels: scrape(port).get((name, tuple(sorted(labels.items()))), 0.0)  # noqa: E731
        wait_until(lambda: count("lowkiq_process_jobs_total", worker="Recorder", outcome="performed") == 12
                   and count("lowkiq_process_morgued_jobs_total", worker="Flaky") == 1, timeout=30)
        samples = scrape(port)
        assert count("lowkiq_process_jobs_total", worker="Flaky", outcome="failed") == 4  # 1 + max_retry_count
        assert samples[("lowkiq_perform_duration_seconds_count", (("outcome", "performed"), ("worker", "Recorder")))] >= 4
        assert samples[("lowkiq_batch_size_jobs_sum", (("worker", "Recorder"),))] == 12
        assert count("lowkiq_leases_acquired_total", worker="Recorder") == app.Recorder.shards_count
        assert count("lowkiq_lease_takeovers_total", worker="Recorder") == 0
        assert count("lowkiq_outage") == 0
        assert {name.split("_")[0] for name, _ in samples} == {"lowkiq"}  # its own registry: no process_*, python_*
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            served = served_names(reply.read().decode())
        named = readme_metric_names("A server's own metrics")
        assert len(named) >= 10 and named <= served, f"the README names metrics a server does not serve: " \
                                                     f"{sorted(named - served)}"
    finally:
        assert server.stop() == 0


def _answers(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return False
    return True


def test_a_taken_metrics_port_is_a_one_line_error(tmp_path, redis_url):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(tmp_path, "-r", str(import_app().__file__), "--redis-url", redis_url, "--metrics-port",
                         str(port), env={"APP_RECORD_DIR": str(tmp_path)})
    assert f"cannot serve metrics on port {port}" in one_line_error(result)


def test_tallies_of_many_threads_add_up_exactly():
    import threading

    from prometheus_client import generate_latest

    from lowkiq.events import Event
    from lowkiq.server.process_metrics import ProcessMetrics

    metrics = ProcessMetrics()

    def work(n: int) -> None:
        for i in range(1000):
            metrics(Event("batch_taken", 0.0, {"worker": "W", "ids": ["a"] * (1 + i % 3), "shard": 0, "thread": ""}))
            outcome = "failed" if i % 10 == 0 else "performed"
            metrics(Event(outcome, 0.0, {"worker": "W", "ids": ["a"], "seconds": 0.002 * (i % 5), "shard": 0}))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
             for s in family.samples}
    assert found[("lowkiq_process_jobs_total", (("outcome", "performed"), ("worker", "W")))] == 3600
    assert found[("lowkiq_process_jobs_total", (("outcome", "failed"), ("worker", "W")))] == 400
    assert found[("lowkiq_batch_size_jobs_count", (("worker", "W"),))] == 4000
    assert found[("lowkiq_batch_size_jobs_sum", (("worker", "W"),))] == 4 * sum(1 + i % 3 for i in range(1000))
    assert found[("lowkiq_batch_size_jobs_bucket", (("le", "1"), ("worker", "W")))] == 4 * 334
    durations = ("lowkiq_perform_duration_seconds_bucket", (("le", "0.005"), ("outcome", "performed"), ("worker", "W")))
    assert found[durations] == 4 * sum(1 for i in range(1000) if i % 10 and 0.002 * (i % 5) <= 0.005)


def test_a_batch_that_never_ran_counts_as_failed_without_a_duration():
    from prometheus_client import generate_latest

    from lowkiq.events import Event
    from lowkiq.server.process_metrics import ProcessMetrics

    metrics = ProcessMetrics()
    # A payload that could not be loaded: perform never ran, so no duration is known.
    metrics(Event("failed", 0.0, {"worker": "W", "shard": 0, "ids": ["a", "b"], "seconds": None, "error": "x",
                                  "exception": ValueError("x")}))
    metrics(Event("failed", 0.0, {"worker": "W", "shard": 0, "ids": ["c"], "seconds": 0.25, "error": "x",
                                  "exception": ValueError("x")}))
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
             for s in family.samples}
    failed = (("outcome", "failed"), ("worker", "W"))
    assert found[("lowkiq_process_jobs_total", failed)] == 3
    assert found[("lowkiq_perform_duration_seconds_count", failed)] == 1
    assert found[("lowkiq_perform_duration_seconds_sum", failed)] == 0.25
