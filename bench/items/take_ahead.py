"""Item 13: take-ahead (docs/take-ahead.md): Lowkiq's shape at batch_size 1 with take-ahead off and on, beside
batch_size 10, in turn within each run."""

from __future__ import annotations

from ..common import ItemResult, Sizes, median, spread
from ..lowkiq_side import LowkiqRun, cost_breakdown, drain_blank
from ..options import Options
from ..redis_server import RedisServer

# (label, batch_size, the server app's environment)
SHAPES = (("batch 1, take-ahead off (take_ahead = 1)", 1, {"BENCH_TAKE_AHEAD": "1"}),
          ("batch 1, take-ahead on (the default)", 1, {}),
          ("batch 10", 10, {}))


def run(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(13, "Take-ahead", f"{sizes.jobs:,} blank jobs, one `lowkiq` process, 5 threads, shards_count "
                        "5, lag scheduler; the three shapes drained in turn in each run (the order rotates)")
    runs: dict[str, list[LowkiqRun]] = {label: [] for label, _, _ in SHAPES}
    with RedisServer() as redis_server:
        for n in range(sizes.runs):
            order = SHAPES[n % len(SHAPES):] + SHAPES[:n % len(SHAPES)]
            for label, batch, env in order:
                runs[label].append(drain_blank(redis_server.url, sizes, scheduler="lag", shards_count=5,
                                               batch_size=batch, server_env=env))
    off, on = (runs[SHAPES[0][0]], runs[SHAPES[1][0]])
    for label, _, _ in SHAPES:
        done = runs[label]
        costs = [cost_breakdown(r) for r in done]
        result.row(f"{label}: drain, jobs/s", spread([r.jobs_per_second for r in done], "{:,.0f}"))
        result.row(f"{label}: Redis CPU per job, µs", spread([c["redis_cpu_us"] for c in costs], "{:.1f}"),
                   "<= 10" if label == SHAPES[1][0] else "",
                   None if sizes.smoke or label != SHAPES[1][0] else median([c["redis_cpu_us"] for c in costs]) <= 10)
        result.row(f"{label}: hot script per job, µs", spread([c["evalsha_us"] * c["evalsha_per_job"] for c in costs],
                                                             "{:.1f}"))
        result.row(f"{label}: Redis commands per job", spread([c["commands_per_job"] for c in costs], "{:.2f}"))
        result.row(f"{label}: server CPU per job, µs", spread([c["server_cpu_us"] for c in costs], "{:.1f}"))
    ratios = [b.jobs_per_second / a.jobs_per_second for a, b in zip(off, on)]
    result.row("drain, take-ahead on / off, same run", spread(ratios, "{:.2f}×"), ">= 5×",
               None if sizes.smoke else median(ratios) >= 5)
    result.note("Take-ahead: a batch_size 1 worker's thread takes up to 16 due ids per call (as many as its recent "
                "perform time fits in 50 ms) and performs them one at a time; see docs/take-ahead.md. Redis CPU per "
                "job counts everything Redis did during the drain (INFO's used_cpu), the hot script per job only "
                "its EVALSHA time.")
    return result
