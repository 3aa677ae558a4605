"""The ``lowkiq`` command.

    lowkiq -r ./path_to_app.py            # the file calls lowkiq.configure(workers=[...])
    lowkiq -r app.py --threads 10 --scheduler seq
    lowkiq -r app.py --nodes 3 --node-number 0
    lowkiq -r app.py --change-layout OrdersWorker   # record a new shards_count, queue empty
    lowkiq --stop-embedded                # stop the embedded Redis of ./.lowkiq

Options given here win over the app's ``configure()`` and the environment.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import redis

from . import __version__, app_file, connection, layout, log_format
from . import runtime as runtime_module
from .config import Settings
from .cpu_pinning import PinningError, check
from .errors import LayoutMismatch
from .options import OPTIONS, Option
from .runtime import Runtime
from .server import MetricsPortError, NoWorkers, Server
from .transport import TopologyError

EXIT_USAGE = 2
# Subcommands of the ops CLI (lowkiq/ops_cli.py), kept here so that starting a server never imports it.
OPS_COMMANDS = ("stats", "servers", "jobs", "morgue", "pause", "resume", "audit")


class CliError(Exception):
    """Printed as one line, exit code 2."""


def parser() -> argparse.ArgumentParser:
    variables = ", ".join(o.env for o in OPTIONS if o.env)
    p = argparse.ArgumentParser(
        prog="lowkiq",
        description="Run the lowkiq server: ordered background jobs on Redis. Any number of servers may run "
        "the same app: they share the shards through leases in Redis. `lowkiq web --help`: the console; "
        f"`lowkiq {'|'.join(OPS_COMMANDS)} --help`: operate the queues from a shell.",
        epilog="Signals: TERM/INT finish the in-flight batches, hand the shards over and exit (a second one: "
        "exit without waiting for running performs); TTIN dumps every thread's stack to the ttin file (default "
        f"/tmp/lowkiq_ttin.txt) and the log. Environment: {variables}, REDIS_URL. Options given here win over "
        "the app's configure(), which wins over the environment.",
    )
    p.add_argument("-r", "--require", metavar="APP.py", help="the Python file that calls lowkiq.configure(workers=[...])")
    for option in OPTIONS:
        if option.flag is None:
            continue
        names = [option.short, option.flag] if option.short else [option.flag]
        p.add_argument(*names, dest=option.name, type=_argument(option), metavar=option.metavar,
                       choices=option.choices, help=option.help + (f" [{option.env}]" if option.env else ""))
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="default INFO; DEBUG logs every batch")
    p.add_argument("--log-format", default=os.environ.get("LOWKIQ_LOG_FORMAT") or "text", choices=log_format.FORMATS,
                   help="text (default) or json: one JSON object per line, with worker, shard, ids and error as "
                        "fields [LOWKIQ_LOG_FORMAT]")
    p.add_argument("--change-layout", metavar="WORKER", help="record WORKER's shards_count as its queue's layout "
                   "and exit; refused while a server serves the queue or it holds jobs")
    p.add_argument("--stop-embedded", action="store_true", help="stop the embedded Redis of ./.lowkiq and exit")
    p.add_argument("-V", "--version", action="version", version=f"lowkiq {__version__}")
    return p


def _argument(option: Option) -> Any:
    """argparse's type for an option: its strict parser, with argparse's own error message."""
    if option.choices:
        return str

    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["web"]:
        from .web_command import main as web_main
        return web_main(argv[1:])
    if argv[:1] and argv[0] in OPS_COMMANDS:
        from .ops_cli import main as ops_main
        return ops_main(argv)
    args = parser().parse_args(argv)
    if args.log_format not in log_format.FORMATS:  # argparse checks the choices of given values only
        print(f"lowkiq: LOWKIQ_LOG_FORMAT must be one of {', '.join(log_format.FORMATS)}, got {args.log_format!r}",
              file=sys.stderr)
        return EXIT_USAGE
    log_format.configure_logging(args.log_level, args.log_format)
    try:
        if args.stop_embedded:
            stopped = connection.stop_embedded()
            print("stopped the embedded Redis of ./.lowkiq" if stopped else "no embedded Redis runs in ./.lowkiq")
            return 0
        if not args.require:
            raise CliError("nothing to run: give the app file with -r ./path_to_app.py (see --help)")
        runtime = load(args.require, overrides(args))
        check_redis(runtime)
        if args.change_layout:
            return change_layout(runtime, args.change_layout)
        if runtime.settings.processes > 1:
            return supervise(runtime, argv)
        return Server(runtime).run()
    except CliError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NoWorkers as exc:
        print(f"lowkiq: {args.require}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (LayoutMismatch, layout.LayoutChangeRefused, MetricsPortError, PinningError) as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        print(f"lowkiq: lost Redis while starting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except connection.EmbeddedRedisError as exc:
        print(f"lowkiq: {exc}", file=sys.stderr)
        return EXIT_USAGE


def supervise(runtime: Runtime, argv: list[str]) -> int:
    """``--processes N``: N children, each an ordinary server process, under this one."""
    from . import supervisor

    s = runtime.settings
    if s.number_of_nodes > 1 or s.build_splitter == "by_node":
        raise CliError("--processes shares the shards through leases between its processes: it does not combine "
                       "with --nodes / --node-number (start each node with --processes instead)")
    if s.cpus:
        check(s.cpus)  # refused here in one line, not by each child after it started serving
        if len(s.cpus) < s.processes:
            supervisor.log.warning("supervisor: cpus lists %d CPUs for %d processes: processes share them in turn",
                                   len(s.cpus), s.processes)
    runtime.close()  # the children connect on their own
    argvs = supervisor.child_argvs(argv, s.processes, s.member_name, s.metrics_port, s.cpus)
    return supervisor.Supervisor(argvs).run()


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line."""
    given = {o.name: getattr(args, o.name) for o in OPTIONS if o.flag is not None}
    return {name: value for name, value in given.items() if value is not None}


def load(path: str, options: dict[str, Any]) -> Runtime:
    """Run the app file (it configures lowkiq), then apply the command line's options over its settings."""
    try:
        configured = app_file.load(path)
    except app_file.AppFileError as exc:
        raise CliError(str(exc)) from exc
    if not options:
        return configured
    try:
        return runtime_module.configure(**{**as_options(configured.settings), **options})
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc)) from exc


def as_options(settings: Settings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


def check_redis(runtime: Runtime) -> None:
    """Redis answers as configured, else one line: unreachable, a refused password, a wrong URL or topology."""
    url = runtime.settings.redis_url
    shown = connection.describe(url) if url else f"the embedded Redis in {os.path.abspath(connection.EMBEDDED_DIR)}"
    try:
        runtime.client.ping()
    except ValueError as exc:
        raise CliError(f"redis_url {shown}: {exc}") from exc
    except TopologyError as exc:
        raise CliError(f"Redis at {shown}: {exc}") from exc
    except (redis.RedisError, OSError) as exc:
        raise CliError(f"cannot reach Redis at {shown}: {exc}") from exc


def change_layout(runtime: Runtime, worker_name: str) -> int:
    workers = {w.__name__: w for w in runtime.settings.workers}
    if worker_name not in workers:
        raise CliError(f"--change-layout {worker_name}: the app has no such worker (it has {', '.join(sorted(workers))})")
    worker = workers[worker_name]
    before = layout.change(runtime.client, worker)
    if before == worker.shards_count:
        print(f"queue {worker.queue_name!r} is already split into {before} shards")
    else:
        print(f"queue {worker.queue_name!r}: {before or 'no'} shards recorded before, {worker.shards_count} now")
    return 0


if __name__ == "__main__":
    sys.exit(main())
