"""The layout's promises, read from the code: the library never imports the web package, the store names no
user class, the web console and the ops CLI reach Redis through lowkiq.console, the import graph has at most
two cycles (each said where it is made), the operators' commands load no Flask, and every error lowkiq raises
on purpose is a LowkiqError users can catch. docs/architecture.md draws the rooms these keep apart."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import lowkiq

ROOT = Path(__file__).resolve().parents[2]
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


def test_no_module_of_the_library_imports_the_web_package():
    offenders = {}
    for path in sorted((ROOT / "lowkiq").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        web = {m for m in imported_modules(path) if m == "lowkiq.webui" or m.startswith(("lowkiq.webui.", "flask"))}
        if web and name not in SERVES_THE_WEB:
            offenders[name] = sorted(web)
    assert offenders == {}


# -- the import graph of lowkiq and of the web package (installed as lowkiq.webui) ------------------------------


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "webui":
        parts.insert(0, "lowkiq")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted([*(ROOT / "lowkiq").rglob("*.py"), *(ROOT / "webui").rglob("*.py")])}


def import_sites(name: str) -> dict[str, list[int]]:
    """The modules of lowkiq that module ``name`` imports, each with the lines that import it: every import
    (at the top, inside a function, under TYPE_CHECKING), a name taken from a package counted as its module."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    sites: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            wanted = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in MODULES:  # a name defined in a module: that module
                target = target.rpartition(".")[0]
            if target and target != name:
                sites.setdefault(target, []).append(node.lineno)
    return sites


GRAPH = {name: import_sites(name) for name in MODULES}


def cycles() -> list[list[str]]:
    """The import cycles: each a set of modules that reach one another (a strongly connected component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return found


def test_the_store_names_no_user_class_nor_the_configuration():
    """lowkiq.store sits under worker.py, schedule.py, config.py and runtime.py: what it reads of a worker or a
    schedule is declared in lowkiq.spec, below them all."""
    above = ("lowkiq.worker", "lowkiq.schedule", "lowkiq.config", "lowkiq.runtime")
    offenders = {name: sorted(set(GRAPH[name]) & set(above)) for name in GRAPH
                 if name.startswith("lowkiq.store") and set(GRAPH[name]) & set(above)}
    assert offenders == {}


# Modules of the web console and the CLI that may import lowkiq.store, and why: the server command (lowkiq -r)
# claims the queues' layouts when a server starts and records a new one for --change-layout, before any console
# is built; neither is an operator's read or action on what a queue holds.
MAY_USE_THE_STORE = {"lowkiq.cli": "the server command and its --change-layout"}


def test_the_web_console_and_the_cli_reach_redis_through_the_console():
    """webui/ and lowkiq/cli/ read and act on what Redis keeps through lowkiq.console only."""
    surfaces = [name for name in GRAPH if name.startswith(("lowkiq.webui", "lowkiq.cli"))]
    assert "lowkiq.cli.ops" in surfaces and "lowkiq.webui.pause_view" in surfaces
    offenders = {name: sorted(m for m in GRAPH[name] if m.startswith("lowkiq.store")) for name in surfaces
                 if name not in MAY_USE_THE_STORE and any(m.startswith("lowkiq.store") for m in GRAPH[name])}
    assert offenders == {}


def comment_at(lines: list[str], number: int) -> str:
    """The comment on line ``number`` (1-based) and the comment lines right above it."""
    said = [lines[number - 1].partition("#")[2]]
    above = number - 2
    while above >= 0 and lines[above].strip().startswith("#"):
        said.append(lines[above].strip()[1:])
        above -= 1
    return " ".join(said)


def test_at_most_two_import_cycles_each_said_where_it_is_made():
    """Every import counts, at call time and under TYPE_CHECKING too. A cycle is allowed when one of its imports
    says why in a comment on its line or right above it."""
    found = cycles()
    assert len(found) <= 2, found
    for component in found:
        said = False
        for name in component:
            lines = MODULES[name].read_text().splitlines()
            for target, numbers in GRAPH[name].items():
                if target in component:
                    said |= any("cycle" in comment_at(lines, n).lower() for n in numbers)
        assert said, f"the import cycle {component} is not explained where it is made"


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


def test_lowkiq_and_its_operators_commands_load_no_flask(redis_url):
    probe = ("import sys, lowkiq, lowkiq.cli, lowkiq.cli.ops, lowkiq.console, lowkiq.server; "
             "from lowkiq.cli import main; "
             "code = main(['stats', '--redis-url', sys.argv[1], '--json']); "
             "print('FLASK' if any(m == 'flask' or m.startswith(('flask.', 'jinja2', 'lowkiq.webui')) "
             "for m in sys.modules) else 'NO FLASK', code)")
    done = subprocess.run([sys.executable, "-c", probe, redis_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "NO FLASK 0"


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
