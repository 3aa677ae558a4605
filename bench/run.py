"""Run the benchmark suite: ``python -m bench.run [--smoke] [--only 1,2] [--runs N]``.

Every item starts its own redis-server and, where a lowkiq server is
involved, runs it as a real ``lowkiq -r bench/apps/<app>.py`` process.
The full run writes bench/RESULTS.md; ``--smoke`` (tiny sizes, no
verdicts) only checks that every benchmark still works.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import machine, report
from .common import FULL, SMOKE, ItemResult, Sizes
from .options import Options

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SAVED = Path(__file__).resolve().parent / "results"


def items() -> dict[int, Callable[[Sizes, Options], ItemResult]]:
    from .items import (
        baseline,
        ceiling,
        cluster,
        console,
        cores,
        events,
        memory,
        merging,
        others,
        take_ahead,
        throughput,
    )

    return {1: throughput.item1, 2: throughput.item2, 3: merging.run, 4: others.run, 5: memory.run, 6: console.run,
            7: baseline.run, 8: cluster.run, 9: events.run, 10: cores.run, 11: console.run_at_10x,
            12: ceiling.run, 13: take_ahead.run}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes, under a minute, no verdicts (CI)")
    p.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10,11,12,13", help="items to run, e.g. 1,2 (default all)")
    p.add_argument("--runs", type=int, help="timed runs per measurement (default 3; smoke 1)")
    p.add_argument("--others-runs", type=int, help="item 4: rounds of pairs, lowkiq and each peer (default 1)")
    p.add_argument("--peer-jobs", type=int, help="item 4: jobs each peer drains (default 100,000: RQ's SimpleWorker "
                   "takes about 6 minutes on them)")
    p.add_argument("--fork-jobs", type=int, help="item 4: jobs RQ's forking worker drains (default 2,000)")
    p.add_argument("--profile", choices=["auto", "always", "never"], default=None,
                   help="py-spy profile of the server: where a target is missed (auto, default), always, never")
    p.add_argument("--no-http", action="store_true", help="item 6: only in-process (Flask test client), no gunicorn")
    p.add_argument("--quiet-load", type=float, default=1.0, help="wait for the 1-minute load to drop below this")
    p.add_argument("--quiet-wait", type=float, default=None,
                   help="seconds to wait for a quiet machine, over the whole run (default 600; smoke 0)")
    p.add_argument("--compose", action="store_true", help="only rewrite bench/RESULTS.md from the saved results")
    p.add_argument("-v", "--verbose", action="store_true", help="print the notes and profiles too")
    p.add_argument("--output", type=Path, default=None, help="where to write the results (default bench/RESULTS.md; "
                   "smoke runs write nothing unless given)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    # SIGTERM unwinds like Ctrl-C: every redis-server and lowkiq server this run started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.compose:
        report.write(RESULTS, report.load(SAVED), machine.describe())
        print(f"wrote {RESULTS}")
        return 0
    sizes = SMOKE if args.smoke else FULL
    if args.runs:
        sizes = dataclasses.replace(sizes, runs=args.runs)
    if args.others_runs:
        sizes = dataclasses.replace(sizes, others_runs=args.others_runs)
    if args.peer_jobs:
        sizes = dataclasses.replace(sizes, rq_jobs=args.peer_jobs)
    if args.fork_jobs:
        sizes = dataclasses.replace(sizes, rq_fork_jobs=args.fork_jobs)
    options = Options(profile=args.profile or ("always" if args.smoke else "auto"), console_http=not args.no_http)
    wanted = sorted({int(x) for x in args.only.split(",") if x.strip()})
    chosen = items()
    unknown = [n for n in wanted if n not in chosen]
    if unknown:
        print(f"unknown items {unknown}; known: {sorted(chosen)}", file=sys.stderr)
        return 2
    wait_budget = args.quiet_wait if args.quiet_wait is not None else (0 if args.smoke else 600)
    started = time.time()
    here = machine.describe()
    deadline = time.monotonic() + wait_budget
    results: list[ItemResult] = []
    loads: dict[int, float] = {}
    failed = []
    print(f"lowkiq benchmarks ({'smoke' if args.smoke else 'full'}): items {', '.join(map(str, wanted))}", flush=True)
    command = "python -m bench.run" + ("" if not (argv if argv is not None else sys.argv[1:]) else
                                        " " + shlex.join(argv if argv is not None else sys.argv[1:]))
    for n in wanted:
        loads[n] = machine.wait_quiet(args.quiet_load, max(0.0, deadline - time.monotonic()))
        print(f"\n-- item {n} (1-minute load {loads[n]:.2f})", flush=True)
        item_started = time.time()
        try:
            result = chosen[n](sizes, options)
        except Exception:
            traceback.print_exc()
            failed.append(n)
            continue
        results.append(result)
        print(report.table(result), flush=True)
        if args.verbose:
            for note in result.notes:
                print("\n" + note, flush=True)
        if not args.smoke:
            report.save(SAVED, result, report.meta(load=loads[n], runs=sizes.runs, seconds=time.time() - item_started,
                                                   command=command, machine=here))
    elapsed = time.time() - started
    output = args.output or (None if args.smoke else RESULTS)
    if output is not None and results:
        if args.smoke or args.output:
            # Only this run's items, not merged with the saved ones.
            saved = [(r, report.meta(load=loads[r.number], runs=sizes.runs, seconds=elapsed, command=command,
                                     machine=here)) for r in results]
        else:
            saved = report.load(SAVED)
        report.write(output, saved, here)
        print(f"\nwrote {output}")
    print(f"\ndone in {elapsed:.0f} s" + (f"; items {failed} FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
