"""The benchmark suite keeps working: every item runs at tiny sizes (no timings are judged)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_every_benchmark_item_runs_in_smoke_mode():
    done = subprocess.run([sys.executable, "-m", "bench.run", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    headers = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert headers == ["== 1. Lowkiq's shape", "== 2. Batched", "== 3. Merging", "== 4. Side by side", "== 5. Memory",
                       "== 6. Console",
                       "== 7. Leases and transport against the previous code", "== 8. Redis Cluster beside standalone",
                       "== 9. Events on the hot path", "== 10. More than one core", "== 11. Console at 10× scale"]
    assert "payloads out of version order" in done.stdout
