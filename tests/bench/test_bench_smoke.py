"""The benchmark suite keeps working: every item runs at tiny sizes (no timings are judged)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_benchmark_item_runs_in_smoke_mode():
    done = subprocess.run([sys.executable, "-m", "bench.run", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    headers = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert headers == ["== 1. Lowkiq's shape", "== 2. Batched", "== 3. Merging", "== 4. Side by side", "== 5. Memory",
                       "== 6. Console",
                       "== 7. Leases and transport against the previous code", "== 8. Redis Cluster beside standalone",
                       "== 9. Events on the hot path", "== 10. More than one core", "== 11. Console at 10× scale",
                       "== 12. Redis as the ceiling", "== 13. Take-ahead"]
    assert "payloads out of version order" in done.stdout
    # the default worker keeps every payload of the Zipf workload (item 12)
    assert re.search(r"Zipf workload, default worker: payloads dropped +0 ", done.stdout), done.stdout[-3000:]


@pytest.mark.slow
def test_ordering_workload_runs_in_smoke_mode_and_lowkiq_keeps_every_id_in_order():
    done = subprocess.run([sys.executable, "-m", "bench.ordering", "--smoke"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    by_queue = [(row[0].lstrip("| "), row) for row in rows[1:]]
    assert sorted({name for name, _ in by_queue}) == ["arq", "dramatiq", "lowkiq", "rq", "saq", "streaq", "taskiq"]
    [lowkiq] = [row for name, row in by_queue if name == "lowkiq"]
    assert lowkiq[2:4] == ["0", "0"], lowkiq  # versions applied out of order, ids left at an older version


@pytest.mark.slow
def test_async_io_bench_runs_in_smoke_mode_and_its_drain_drains_every_id():
    done = subprocess.run([sys.executable, "-m", "bench.async_io", "--smoke", "--rounds", "1", "--only", "lowkiq"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [lowkiq] = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| lowkiq ")]
    assert lowkiq[2:4] == ["0", "0"], lowkiq  # versions applied out of order, ids left at an older version
    done = subprocess.run([sys.executable, "-m", "bench.async_io", "--drain", "200", "--rounds", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"drained 200 ids at [\d,]+ jobs/s; the server's CPU [\d,]+ µs per job", done.stdout + done.stderr), \
        done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.slow
def test_script_cost_compares_push_with_an_older_revision_as_that_revision_assembled_it():
    # HEAD against the working tree: the older script comes from HEAD's own lowkiq, run in a subprocess
    done = subprocess.run([sys.executable, "-m", "bench.script_cost", "--push-before", "HEAD", "--calls", "40",
                           "--pairs", "1", "--ids-per-call", "2", "--micro"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"median [\d.]+ → [\d.]+, median of the ratios [\d.]+×", done.stdout), done.stdout[-3000:]
    done = subprocess.run([sys.executable, "-m", "bench.script_cost", "--push-steps", "--calls", "40", "--runs", "1",
                           "--shards", "20", "--micro"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the whole script, per call" in done.stdout and "the history entry: XADD" in done.stdout
