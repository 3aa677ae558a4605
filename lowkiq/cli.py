"""The ``lowkiq`` command.

    lowkiq -r ./path_to_app.py            # the file calls lowkiq.configure(workers=[...])
    lowkiq -r app.py --threads 10 --scheduler seq
    lowkiq -r app.py --nodes 3 --node-number 0
    lowkiq --stop-embedded                # stop the embedded Redis of ./.lowkiq

Options given here win over the app's ``configure()`` and the environment.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
import traceback
from dataclasses import fields
from pathlib import Path
from typing import Any, Sequence

import redis

from . import __version__, connection
from . import runtime as runtime_module
from .config import Settings
from .runtime import Runtime
from .server import NoWorkers, Server

EXIT_USAGE = 2
LOG_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"


class CliError(Exception):
    """Printed as one line, exit code 2."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lowkiq",
        description="Run the lowkiq server: ordered background jobs on Redis.",
        epilog="Signals: TERM/INT finish the in-flight batches and exit; TTIN dumps every thread's stack "
        "to the ttin file (default /tmp/lowkiq_ttin.txt) and the log. Environment: LOWKIQ_REDIS_URL or "
        "REDIS_URL (neither: an embedded Redis in ./.lowkiq), LOWKIQ_THREADS_PER_NODE, LOWKIQ_NUMBER_OF_NODES, "
        "LOWKIQ_NODE_NUMBER, LOWKIQ_SCHEDULER, LOWKIQ_SPLITTER, LOWKIQ_POLL_INTERVAL, LOWKIQ_TTIN_FILE.",
    )
    p.add_argument("-r", "--require", metavar="APP.py", help="the Python file that calls lowkiq.configure(workers=[...])")
    p.add_argument("-t", "--threads", type=int, metavar="N", help="threads of this node (default 5)")
    p.add_argument("--nodes", type=int, metavar="N", help="number of nodes sharing the shards (by-node splitting)")
    p.add_argument("--node-number", type=int, metavar="K", help="this node's number, 0..N-1")
    p.add_argument("--scheduler", choices=["lag", "seq"], help="which shard a thread works next (default lag)")
    p.add_argument("--splitter", choices=["default", "by_node"], help="which shards a thread owns")
    p.add_argument("--poll-interval", type=float, metavar="SECONDS", help="idle wait between polls (default 1)")
    p.add_argument("--redis-url", metavar="URL", help="Redis to use (default: LOWKIQ_REDIS_URL, REDIS_URL, else embedded)")
    p.add_argument("--ttin-file", metavar="PATH", help="where SIGTTIN writes the thread dump")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="default INFO; DEBUG logs every batch")
    p.add_argument("--stop-embedded", action="store_true", help="stop the embedded Redis of ./.lowkiq and exit")
    p.add_argument("-V", "--version", action="version", version=f"lowkiq {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, stream=sys.stderr)
    try:
        if args.stop_embedded:
            stopped = connection.stop_embedded()
            print("stopped the embedded Redis of ./.lowkiq" if stopped else "no embedded Redis runs in ./.lowkiq")
            return 0
        if not args.require:
            raise CliError("nothing to run: give the app file with -r ./path_to_app.py (see --help)")
        runtime = load(args.require, overrides(args))
        check_redis(runtime)
        return Server(runtime).run()
    except CliError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NoWorkers as exc:
        print(f"lowkiq: {args.require}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        print(f"lowkiq: lost Redis while starting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except connection.EmbeddedRedisError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    chosen = {
        "threads_per_node": args.threads,
        "number_of_nodes": args.nodes,
        "node_number": args.node_number,
        "build_scheduler": args.scheduler,
        "build_splitter": args.splitter,
        "poll_interval": args.poll_interval,
        "redis_url": args.redis_url,
        "ttin_file": args.ttin_file,
    }
    return {k: v for k, v in chosen.items() if v is not None}


def load(path: str, options: dict[str, Any]) -> Runtime:
    """Run the app file as a module; it must leave lowkiq configured with workers."""
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{path}: no such file (the app that calls lowkiq.configure(workers=[...]))")
    file = file.resolve()
    # The app imports its sibling modules the way `python app.py` would let it.
    sys.path.insert(0, str(file.parent))
    name = file.stem if file.stem not in sys.modules else f"lowkiq_app_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    runtime_module._current = None
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)).rstrip()
        raise CliError(f"{path} raised while loading:\n{detail}") from exc
    if runtime_module._current is None:
        raise CliError(f"{path} does not configure lowkiq: it must call lowkiq.configure(workers=[...])")
    settings = runtime_module._current.settings
    if not settings.workers:
        raise CliError(f"{path} configures no workers: call lowkiq.configure(workers=[YourWorker, ...])")
    if not options:
        return runtime_module._current
    try:
        return runtime_module.configure(**{**as_options(settings), **options})
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc)) from exc


def as_options(settings: Settings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "extra"}


def check_redis(runtime: Runtime) -> None:
    url = runtime.settings.redis_url or f"the embedded Redis in {os.path.abspath(connection.EMBEDDED_DIR)}"
    try:
        runtime.client.ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise CliError(f"cannot reach Redis at {url}: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
