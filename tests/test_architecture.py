"""The layout's promises, read from the code: the library never imports the web package, the operators'
commands load no Flask, and every error lowkiq raises on purpose is a LowkiqError users can catch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import lowkiq

ROOT = Path(__file__).resolve().parent.parent
# The modules that may: `lowkiq web` serves the web package, so it reads the console's settings from it; a
# Django project serves the console through lowkiq.contrib.django's view, which calls its Flask app.
SERVES_THE_WEB = {"lowkiq/cli/web.py", "lowkiq/contrib/django/console.py"}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (at the top or inside a function), relative imports made absolute."""
    package = list(path.relative_to(ROOT).with_suffix("").parts)[:-1]  # a module's, or an __init__'s own
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.slow
def test_no_module_of_the_library_imports_the_web_package():
    offenders = {}
    for path in sorted((ROOT / "lowkiq").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        web = {m for m in imported_modules(path) if m == "lowkiq.webui" or m.startswith(("lowkiq.webui.", "flask"))}
        if web and name not in SERVES_THE_WEB:
            offenders[name] = sorted(web)
    assert offenders == {}


def test_the_consoles_route_modules_never_import_each_other():
    """Each route module takes what routes share from webui/http.py and the other helpers, never from
    another route module (webui/__init__.py imports them all to register their routes)."""
    routes = {"api", "audit_view", "export", "hot_view", "pause_view", "prometheus", "schedules_view", "servers",
              "stale", "views"}
    assert routes <= {p.stem for p in (ROOT / "webui").glob("*.py")}
    crossings = {}
    for name in sorted(routes):
        found = {m.split(".")[1] for m in imported_modules(ROOT / "webui" / f"{name}.py")
                 if m.startswith("webui.") and m.split(".")[1] in routes and m.split(".")[1] != name}
        if found:
            crossings[name] = sorted(found)
    assert crossings == {}


@pytest.mark.slow
def test_lowkiq_and_its_operators_commands_load_no_flask(redis_url):
    probe = ("import sys, lowkiq, lowkiq.cli, lowkiq.cli.ops, lowkiq.console, lowkiq.server; "
             "from lowkiq.cli import main; "
             "code = main(['stats', '--redis-url', sys.argv[1], '--json']); "
             "print('FLASK' if any(m == 'flask' or m.startswith(('flask.', 'jinja2', 'lowkiq.webui')) "
             "for m in sys.modules) else 'NO FLASK', code)")
    done = subprocess.run([sys.executable, "-c", probe, redis_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "NO FLASK 0"


@pytest.mark.slow
def test_every_error_users_may_catch_is_a_lowkiq_error_exported_at_the_top():
    errors = [getattr(lowkiq, name) for name in lowkiq.__all__
              if isinstance(getattr(lowkiq, name), type) and issubclass(getattr(lowkiq, name), BaseException)]
    assert len(errors) >= 18 and all(issubclass(error, lowkiq.LowkiqError) for error in errors)
    # Each keeps the built-in base callers caught before.
    assert issubclass(lowkiq.BadInput, ValueError) and issubclass(lowkiq.NotConfigured, RuntimeError)
    assert issubclass(lowkiq.UnknownWorker, LookupError)
    for path in sorted((ROOT / "lowkiq").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in ("Exception", "ValueError",
                                                                                         "RuntimeError", "LookupError")
                                                      for b in node.bases):
                # Raised on purpose and meant for users, or kept inside: each other one says why below.
                assert node.name in INTERNAL or path.name == "errors.py", f"{path}: {node.name} is no LowkiqError"


# Caught where they are raised, never seen by users: control flow of the CLI and the server.
INTERNAL = {"CliError", "WebError", "OpsError", "StopProcess"}
