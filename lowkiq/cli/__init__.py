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
import difflib
import logging
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, NoReturn

import redis

from .. import __version__, app_file, connection, log_format
from .. import runtime as runtime_module
from ..config import Settings
from ..errors import LayoutMismatch
from ..options import OPTIONS, Option
from ..runtime import Runtime
from ..server import MetricsPortError, NoWorkers, Server, signals
from ..server.cpu_pinning import PinningError, check
from ..store import layout
from ..transport import TopologyError
from .commands import COMMANDS as COMMANDS
from .commands import OPS_COMMANDS as OPS_COMMANDS

EXIT_USAGE = 2


log = logging.getLogger("lowkiq.cli")


class CliError(Exception):
    """Printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser; with ``--log-format json`` a bad option is one JSON line on stderr too."""

    log_format = "text"

    def error(self, message: str) -> NoReturn:
        if self.log_format != "json":
            super().error(message)
        sys.exit(refuse("json", f"{message} (see --help)", error_class="ArgumentError"))


def parser(log_format_chosen: str = "text") -> argparse.ArgumentParser:
    variables = ", ".join(o.env for o in OPTIONS if o.env)
    p = _Parser(
        prog="lowkiq",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the commands' list in its columns
        description=_fill("Run the lowkiq server: ordered background jobs on Redis. Any number of servers may run "
                          "the same app: they share the shards through leases in Redis.")
        + "\n\ncommands (lowkiq COMMAND --help for each):\n" + commands_help(),
        epilog=_fill("Signals: TERM/INT finish the in-flight batches, hand the shards over and exit (a second one: "
                     "exit without waiting for running performs); TTIN dumps every thread's stack to the ttin file "
                     "(default /tmp/lowkiq_ttin.txt) and the log.")
        + "\n\n" + _fill(f"Environment: {variables}, REDIS_URL. Options given here win over the app's "
                          "configure(), which wins over the environment."),
    )
    p.add_argument("-r", "--require", metavar="APP.py", help="the Python file that calls lowkiq.configure(workers=[...])")
    add_server_options(p)
    p.add_argument("--stop-embedded", action="store_true", help="stop the embedded Redis of ./.lowkiq and exit")
    p.add_argument("-V", "--version", action="version", version=f"lowkiq {__version__}")
    p.log_format = log_format_chosen
    return p


def add_server_options(p: argparse.ArgumentParser) -> None:
    """The server's options but ``-r``: also those of a framework's command that runs the same server for an
    app it configured itself (Django's ``manage.py lowkiq``)."""
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


def commands_help() -> str:
    """Every command of ``lowkiq``, one a line with what it does: the server's options follow."""
    rows = [("-r APP.py [options]", "run a server for the app (the options below)"),
            ("web", "serve the console in a browser"), *COMMANDS.items()]
    width = max(len(name) for name, _ in rows) + 2
    return "\n".join(textwrap.fill(text, 79, initial_indent=f"  {name.ljust(width)}",
                                    subsequent_indent=" " * (width + 2)) for name, text in rows)


def _fill(text: str) -> str:
    return textwrap.fill(text, 79)


def unknown_command(word: str) -> str | None:
    """The one line for ``lowkiq WORD`` when WORD is no command (``lowkiq stat``), else None: an option,
    or nothing given, is the server's to parse."""
    if not word or word.startswith("-"):
        return None
    if word.endswith(".py"):
        return f"unknown command {word!r}: to run a server for it, lowkiq -r {word}"
    close = difflib.get_close_matches(word, ["web", *COMMANDS], n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"the commands are web, {', '.join(COMMANDS)}"
    return f"unknown command {word!r}: {hint} (lowkiq --help lists them; a server runs with lowkiq -r APP.py)"


def chosen_log_format(argv: Sequence[str]) -> str:
    """The log format ``argv`` and the environment choose, read before argparse: an option argparse
    refuses must already be reported in it. The last ``--log-format`` wins, as in argparse; an
    abbreviation argparse would accept (``--log-f``) counts too."""
    chosen = os.environ.get("LOWKIQ_LOG_FORMAT") or "text"
    for n, arg in enumerate(argv):
        if arg == "--":
            break
        flag, equals, value = arg.partition("=")
        if len(flag) >= len("--log-f") and "--log-format".startswith(flag):
            if equals:
                chosen = value
            elif n + 1 < len(argv):
                chosen = argv[n + 1]
    return chosen


def refuse(form: str, message: str, *, code: int = EXIT_USAGE, error_class: str | None = None) -> int:
    """Report why the server does not start and return its exit code: ``lowkiq: <message>`` on stderr,
    or with the json log format one JSON object on one line (a traceback in its ``exception``)."""
    if form != "json":
        print(f"lowkiq: {message}", file=sys.stderr)
        return code
    first, _, detail = message.partition("\n")
    values: dict[str, Any] = {"exit_code": code}
    if error_class:
        values["error_class"] = error_class
    if detail:
        values["exception"] = detail
    record = logging.makeLogRecord({"name": log.name, "levelno": logging.ERROR, "levelname": "ERROR", "msg": first,
                                    "threadName": "MainThread", **log_format.fields(**values)})
    print(log_format.JsonFormatter().format(record), file=sys.stderr, flush=True)
    return code


def _error_class(exc: BaseException) -> str:
    """The class of the failure under lowkiq's wrappers: what an operator looks up."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return type(exc).__name__


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
        from .web import main as web_main
        return web_main(argv[1:])
    if argv[:1] and argv[0] in OPS_COMMANDS:
        from .ops import main as ops_main
        return ops_main(argv)
    mistyped = unknown_command(argv[0]) if argv else None
    if mistyped:
        return refuse(chosen_log_format(argv), mistyped, error_class="ArgumentError")
    args = parser(chosen_log_format(argv)).parse_args(argv)
    return serve(args, argv)


def serve(args: argparse.Namespace, argv: Sequence[str], configured: Callable[[], Runtime] | None = None,
          app_name: str | None = None) -> int:
    """Run what the parsed server options ask for, and return the exit status.

    The app is the ``-r`` file's, or, given ``configured``, the runtime it returns: a framework that
    configured lowkiq at its own start-up (Django's ``manage.py lowkiq``) runs the very same server,
    named ``app_name`` in its errors.
    """
    if args.log_format not in log_format.FORMATS:  # argparse checks the choices of given values only
        return refuse("text", f"LOWKIQ_LOG_FORMAT must be one of {', '.join(log_format.FORMATS)}, "
                      f"got {args.log_format!r}")
    logs = log_format.AppLogging(args.log_level, args.log_format)
    form = args.log_format
    app_name = app_name or getattr(args, "require", None)
    try:
        if getattr(args, "stop_embedded", False):
            stopped = connection.stop_embedded()
            print("stopped the embedded Redis of ./.lowkiq" if stopped else "no embedded Redis runs in ./.lowkiq")
            return 0
        if configured is None and not args.require:
            raise CliError("nothing to run: give the app file with -r ./path_to_app.py (see --help)")
        if signals.lacking():
            raise CliError(f"lowkiq -r needs POSIX signals this platform lacks ({', '.join(signals.lacking())}): run "
                           "the server on Linux or macOS (on Windows, in WSL or a container); enqueueing works here")
        try:
            if configured is None:
                runtime = load(args.require, overrides(args))
            else:
                runtime = with_options(configured(), overrides(args))
        finally:
            logs.loaded()
        check_redis(runtime)
        if args.change_layout:
            return change_layout(runtime, args.change_layout)
        if runtime.settings.processes > 1:
            if configured is not None:
                raise CliError(f"--processes starts lowkiq -r APP.py children, and this server's app comes from "
                               f"{app_name}: start one server per core instead (each with --cpus N); they share "
                               "the shards through leases")
            return supervise(runtime, list(argv))
        return Server(runtime).run()
    except CliError as exc:
        return refuse(form, str(exc), error_class=_error_class(exc))
    except NoWorkers as exc:
        return refuse(form, f"{app_name}: {exc}", error_class=_error_class(exc))
    except (LayoutMismatch, layout.LayoutChangeRefused, MetricsPortError, PinningError) as exc:
        return refuse(form, str(exc), error_class=_error_class(exc))
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        return refuse(form, f"lost Redis while starting: {exc}", error_class=_error_class(exc))
    except connection.EmbeddedRedisError as exc:
        return refuse(form, str(exc), error_class=_error_class(exc))
    except Exception as exc:
        # Anything else that stops the server (on_server_init raising, a bug) goes through the
        # log, in its format: one JSON line with --log-format json, escaped text otherwise.
        log.error("the server stopped: %s: %s", type(exc).__name__, exc, exc_info=exc,
                     extra=log_format.fields(error_class=type(exc).__name__, exit_code=1))
        return 1


def supervise(runtime: Runtime, argv: list[str]) -> int:
    """``--processes N``: N children, each an ordinary server process, under this one."""
    from ..server import supervisor

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
    return with_options(configured, options)


def with_options(configured: Runtime, options: dict[str, Any]) -> Runtime:
    """The command line's options over what the app configured."""
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
