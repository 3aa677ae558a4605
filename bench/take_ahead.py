"""Take-ahead and merging (docs/take-ahead.md): bursts of versions per id while a server runs, take-ahead
off (``take_ahead = 1``) and on (the default), in alternating pairs.

    python -m bench.take_ahead [--pairs 3] [--ids 1000] [--versions 10]

Each run is bench item 3's shape (``bench/apps/merging.py``: one server, 5 threads, 5 shards, batch_size 1):
``--versions`` calls of ``--ids`` jobs, version by version, sent while the server runs. A merge is a
version that joined a job of its id instead of making one: payloads - performs. Take-ahead widens the
window in which a version of an id cannot join it (from its perform alone to its wait in a run), so it
may merge less; the table says how much, and what it buys in performs and end-to-end time.
"""

from __future__ import annotations

import argparse
import os
import statistics

from .items.merging import _once
from .redis_server import RedisServer

SIDES = {"off": {"BENCH_TAKE_AHEAD": "1"}, "on": {}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--ids", type=int, default=1000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--perform-ms", type=float, default=0.0, help="each perform's own work (slept)")
    parser.add_argument("--bursts", action="store_true", help="send each id's versions in a row, one call each")
    args = parser.parse_args()
    extra = {"BENCH_PERFORM_SECONDS": str(args.perform_ms / 1000)}
    found: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    with RedisServer() as server:
        client = server.client()
        for pair in range(args.pairs):
            order = list(SIDES) if pair % 2 == 0 else list(reversed(SIDES))
            for side in order:
                load = os.getloadavg()[0]
                run = _once(server.url, client, args.ids, args.versions, {**SIDES[side], **extra}, args.bursts)
                run["load"] = load
                found[side].append(run)
                merges = run["payloads"] - run["performs"]
                print(f"pair {pair + 1}/{args.pairs} {side}: load {load:.2f}, {run['performs']:,.0f} performs, "
                      f"{merges:,.0f} merges, out of order {run['out_of_order']:.0f}, "
                      f"end-to-end {run['end_to_end']:.2f} s", flush=True)
    ratios = [(on["payloads"] - on["performs"]) / max(1.0, off["payloads"] - off["performs"])
              for off, on in zip(found["off"], found["on"])]
    print()
    print(f"| {args.ids:,} ids × {args.versions} versions, {args.pairs} pairs | take-ahead off | take-ahead on |")
    print("| --- | ---: | ---: |")
    for title, key, fmt in (("performs", "performs", "{:,.0f}"), ("payloads", "payloads", "{:,.0f}"),
                            ("end-to-end, s", "end_to_end", "{:.2f}"),
                            ("payloads out of version order", "out_of_order", "{:.0f}")):
        row = [fmt.format(statistics.median(r[key] for r in found[side])) for side in SIDES]
        print(f"| {title} (median) | {row[0]} | {row[1]} |")
    merges = [fmt_merges(found[side]) for side in SIDES]
    print(f"| merges (median) | {merges[0]} | {merges[1]} |")
    print(f"\nmerges with take-ahead on / off, median of the pairs: {statistics.median(ratios):.3f} "
          f"({min(ratios):.3f} to {max(ratios):.3f})")


def fmt_merges(runs: list[dict[str, float]]) -> str:
    return f"{statistics.median(r['payloads'] - r['performs'] for r in runs):,.0f}"


if __name__ == "__main__":
    main()
