"""``lowkiq.configure`` from Django's ``settings.LOWKIQ``.

Every key is an option of ``lowkiq.configure`` (docs/configuration.md), except ``console``: the
console's settings, by their names in docs/console.md (``{"LOWKIQ_WEB_READONLY": True}``). Options
that name code (``workers``, middlewares, subscribers, serializers...) take dotted paths, imported
once the apps are loaded, since settings must not import the project's modules::

    LOWKIQ = {
        "redis_url": os.environ["LOWKIQ_REDIS_URL"],
        "workers": ["orders.workers.OrdersWorker"],
        "threads_per_node": 4,
    }
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.utils.module_loading import import_string

import lowkiq
from lowkiq.runtime import Runtime

SETTING = "LOWKIQ"
CONSOLE = "console"
# Options whose values are code: a string among them is a dotted path to import.
CODE_LISTS = ("workers", "schedules", "server_middlewares", "client_middlewares", "subscribers")
CODE = ("on_server_init", "last_words", "dump_payload", "load_payload", "format_error", "dump_error", "load_error")


def configure() -> Runtime:
    """Configure lowkiq for this process from ``settings.LOWKIQ``; ``ImproperlyConfigured`` names what is wrong."""
    try:
        return lowkiq.configure(**options())
    except (TypeError, ValueError) as exc:  # lowkiq's own verdict on an option, ConfigurationError included
        raise ImproperlyConfigured(f"settings.{SETTING}: {exc}") from exc


def options() -> dict[str, Any]:
    """The options of ``lowkiq.configure`` that ``settings.LOWKIQ`` gives, its dotted paths imported."""
    given = _setting()
    found = {name: value for name, value in given.items() if name != CONSOLE}
    for name in CODE_LISTS:
        if isinstance(found.get(name), (list, tuple)):
            found[name] = [_code(f'["{name}"][{n}]', value) for n, value in enumerate(found[name])]
    for name in CODE:
        if name in found:
            found[name] = _code(f'["{name}"]', found[name])
    # Django closes a request's stale database connections around every request; a server thread is no
    # request, so without this a perform would meet the connection the database dropped hours ago.
    middlewares = found.get("server_middlewares", [])
    if isinstance(middlewares, (list, tuple)):
        found["server_middlewares"] = [fresh_database_connections, *middlewares]
    return found


def console_settings() -> dict[str, Any]:
    """The console's settings (``LOWKIQ_WEB_*`` names) that ``settings.LOWKIQ["console"]`` gives."""
    given = _setting().get(CONSOLE, {})
    if not isinstance(given, Mapping):
        raise ImproperlyConfigured(f'settings.{SETTING}["{CONSOLE}"] must be a dict of the console\'s settings '
                                   f'such as {{"LOWKIQ_WEB_READONLY": True}}, got {type(given).__name__}')
    return dict(given)


def fresh_database_connections(worker: Any, batch: Any, call_next: Callable[[], Any]) -> Any:
    """A server middleware: what Django does around a request, around a perform."""
    close_old_connections()
    try:
        return call_next()
    finally:
        close_old_connections()


def _setting() -> Mapping[str, Any]:
    given = getattr(settings, SETTING, None)
    if given is None:
        raise ImproperlyConfigured(f'settings.{SETTING} is missing: lowkiq.contrib.django needs at least '
                                   f'{SETTING} = {{"workers": ["yourapp.workers.YourWorker"]}}')
    if not isinstance(given, Mapping):
        raise ImproperlyConfigured(f"settings.{SETTING} must be a dict of lowkiq.configure's options, "
                                   f"got {type(given).__name__}")
    return given


def _code(where: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return import_string(value)
    except ImportError as exc:
        raise ImproperlyConfigured(f"settings.{SETTING}{where}: cannot import {value!r}: {exc}") from exc
