"""Running the user's app file, the one that calls ``lowkiq.configure(workers=[...])``.

The server (``lowkiq -r app.py``), the console (``LOWKIQ_APP=app.py``) and
``lowkiq web --app`` load it the same way: as a module named after the file,
with the file's folder on ``sys.path`` (as ``python app.py`` would have it),
and they check the same things of it.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import TracebackType

from . import runtime as runtime_module

# Raised here; defined with every error users may catch, and importable from here too.
from .errors import AppFileError as AppFileError
from .errors import ConfigurationError
from .runtime import Runtime


def load(path: str, *, as_main_app: bool = True) -> Runtime:
    """Run the app file; the runtime it configured (with at least one worker).

    The server runs it as the module named after the file (``app.py``: ``app``), so that the
    app's own modules can ``import app`` and get the same one. A process that only reads it
    (``as_main_app=False``, the console mounted in another app) gives it a name of its own.
    """
    file = Path(path)
    if not file.is_file():
        raise AppFileError(f"{path}: no such file (the app that calls lowkiq.configure(workers=[...]))")
    file = file.resolve()
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    name = file.stem if as_main_app and file.stem not in sys.modules else f"lowkiq_app_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise AppFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = runtime_module._current
    runtime_module._current = None
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        runtime_module._current = before
        sys.modules.pop(name, None)
        if isinstance(exc, ConfigurationError):
            # lowkiq's own verdict on what the app configured: one line, where configure() was called.
            raise AppFileError(f"{path}{_line_in(exc, file)}: {exc}") from exc
        raise AppFileError(f"{path} raised while loading:\n{as_python_shows(exc, file)}") from exc
    configured = runtime_module._current
    if configured is None:
        runtime_module._current = before
        raise AppFileError(f"{path} does not configure lowkiq: it must call lowkiq.configure(workers=[...])")
    if not configured.settings.workers:
        raise AppFileError(f"{path} configures no workers: call lowkiq.configure(workers=[YourWorker, ...])")
    return configured


def _app_frames(exc: BaseException, file: Path) -> TracebackType | None:
    """The traceback of ``exc`` from the app file's first frame on: the frames before it are the
    loader's (this module, importlib), which say nothing about the app."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != str(file):
        tb = tb.tb_next
    return tb


def as_python_shows(exc: BaseException, file: Path) -> str:
    """The error as ``python app.py`` would print it: the traceback from the app's own code (a
    syntax error in the file itself has none: its file, line, code and caret), chained exceptions
    included."""
    tb = _app_frames(exc, file)
    if tb is None and not isinstance(exc, SyntaxError):
        tb = exc.__traceback__  # raised before any line of the app ran: every frame is the story
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()


def _line_in(exc: BaseException, file: Path) -> str:
    """``, line N``: the app's last line on the way to ``exc`` (its call of configure())."""
    tb, line = _app_frames(exc, file), None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(file):
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else f", line {line}"
