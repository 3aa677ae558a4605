"""Item 4: lowkiq beside RQ, Dramatiq, saq, streaq, arq and taskiq draining the same blank jobs, against one Redis."""

from __future__ import annotations

import statistics

from ..common import ItemResult, Sizes, log, median, spread
from ..lowkiq_side import drain_blank
from ..machine import load1
from ..options import Options
from ..peers import runner as peers
from ..redis_server import RedisServer


def run(sizes: Sizes, options: Options) -> ItemResult:
    n, fork_n = sizes.rq_jobs, sizes.rq_fork_jobs
    result = ItemResult(4, "Side by side", f"the same Redis; lowkiq (item 1's shape, {sizes.jobs:,} jobs, 5 threads, "
                        f"lag) drains in turn with each peer, in pairs (lowkiq first in odd rounds, the peer first in "
                        f"even ones): RQ (SimpleWorker; a pool of 2; the forking Worker on {fork_n:,} jobs, "
                        f"extrapolated), Dramatiq (1 process × 5 threads; its CLI's defaults), saq, streaq, arq and "
                        f"taskiq with taskiq-redis (1 worker process, 5 concurrent asyncio jobs), {n:,} jobs each "
                        "unless said. Each peer is set up for throughput as its documentation says (docs/benchmarks.md). "
                        "Every job is a blank function; drain = first job start to last job end")
    lowkiq_runs: list[float] = []            # seconds per job, every lowkiq drain
    runs: dict[str, list[peers.PeerRun]] = {peer.label: [] for peer in peers.PEERS}
    ratios: dict[str, list[float]] = {peer.label: [] for peer in peers.PEERS}
    loads: list[float] = []
    with RedisServer() as redis_server:
        url = redis_server.url
        client = redis_server.client()
        for r in range(sizes.others_runs):
            for peer in peers.PEERS:
                loads.append(load1())
                log(f"item 4, round {r + 1}/{sizes.others_runs}: lowkiq and {peer.name} (1-minute load {loads[-1]:.2f})")
                pair: dict[str, float] = {}
                for side in (("lowkiq", peer.name) if r % 2 == 0 else (peer.name, "lowkiq")):
                    if side == "lowkiq":
                        low = drain_blank(url, sizes, scheduler="lag", shards_count=5, batch_size=1)
                        pair[side] = low.drain.seconds / sizes.jobs
                        lowkiq_runs.append(pair[side])
                    else:
                        got = peers.run(peer, client, url, fork_n if peer.few else n)
                        runs[peer.label].append(got)
                        pair[side] = got.drain / got.jobs
                ratios[peer.label].append(pair[peer.name] / pair["lowkiq"])
    low = median(lowkiq_runs)
    result.row("lowkiq drain, jobs/s", spread([1 / s for s in lowkiq_runs], "{:,.0f}"))
    fastest = ("", float("inf"), 0.0)  # (label, seconds per job, ratio)
    for peer in peers.PEERS:
        label, got = peer.label, runs[peer.label]
        per = median([o.drain / o.jobs for o in got])
        ratio = median(ratios[label])
        target = ">= 5×" if peer.name == "RQ SimpleWorker" else ""
        result.row(f"{label}: drain of {got[0].jobs:,} jobs, s", spread([o.drain for o in got]))
        result.row(f"{label}: jobs/s", spread([o.jobs / o.drain for o in got], "{:,.0f}"))
        result.row(f"lowkiq / {label} throughput (median of the pairs)", spread(ratios[label], "{:.1f}×"), target,
                   None if sizes.smoke or not target else ratio >= 5)
        result.row(f"{label}: enqueue, s", spread([o.enqueue for o in got]))
        if not peer.few and per < fastest[1]:
            fastest = (label, per, ratio)
    result.row(f"lowkiq / fastest peer ({fastest[0]}, {1 / fastest[1]:,.0f} jobs/s) throughput", f"{fastest[2]:.2f}×",
               ">= 1× (not slower)", None if sizes.smoke else fastest[2] >= 1)
    forking = next(peer for peer in peers.PEERS if peer.few)
    per_fork = median([o.drain / o.jobs for o in runs[forking.label]])
    result.note(f"RQ's default worker forks a work horse per job: {per_fork * 1e3:.1f} ms per job measured on "
                f"{fork_n:,} jobs, so {n:,} jobs would take about {per_fork * n:,.0f} s (extrapolated linearly, "
                "not measured).")
    result.note(f"Each ratio is the median of {sizes.others_runs} pair(s) of drains run back to back (lowkiq's "
                f"{sizes.jobs:,} jobs and the peer's), the order swapped from one round to the next; lowkiq's row is "
                f"every one of its {len(lowkiq_runs)} drains, median {1 / low:,.0f} jobs/s. The 1-minute load before "
                f"the pairs: median {statistics.median(loads):.2f}, {min(loads):.2f} to {max(loads):.2f}.")
    result.note("How each peer ran (bench/peers/; why, with the documentation each setting follows, in "
                "docs/benchmarks.md): " + "; ".join(f"**{peer.label}** ({peer.version}): {peer.how}"
                                                    for peer in peers.PEERS) + ". The last row compares lowkiq "
                "with the fastest of the peers above (RQ's forking worker aside).")
    return result
