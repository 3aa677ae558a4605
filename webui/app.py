"""The standalone console: ``gunicorn "lowkiq.webui:served_app()"``, configured from the environment.

- ``LOWKIQ_REDIS_URL`` / ``REDIS_URL``: the Redis to watch (else the embedded one in ./.lowkiq/)
- ``LOWKIQ_WEB_REDIS_URL``: the Redis to watch whatever the app configures (``lowkiq web --redis-url``)
- ``LOWKIQ_APP=path/to/app.py``: run the app file and use its ``lowkiq.configure`` (workers,
  serializers); without it, workers are found in the registry servers and clients keep in Redis
- the ``LOWKIQ_WEB_*`` settings of ``settings.SETTINGS`` (basic auth, read-only mode, timeouts,
  limits), each parsed strictly: a bad value stops ``create_app`` with one line naming it
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..console import standalone_console
from . import proxy, security
from .blueprint import bp, error_response, not_allowed_response, template_context
from .settings import from_config, from_environ
from .state import init_app


def create_app(config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Flask:
    """The console alone, dashboard at "/". ``config`` overrides what the environment says.

    Raises ``settings.SettingError`` (a ValueError, one line naming the variable) for a bad setting.

    Example::

        gunicorn -w 2 --threads 4 -b 127.0.0.1:8000 "lowkiq.webui:create_app()"
    """
    env = dict(os.environ if environ is None else environ)
    # No app-level /static: the blueprint serves its own assets under its prefix.
    app = Flask("lowkiq.webui", static_folder=None)
    app.config.update(from_environ(env))
    app.config.update(config or {})
    current = from_config(app.config)  # every setting checked now, not at the first request
    state = init_app(app)
    if state.console_factory is None:
        # Built now so that a bad LOWKIQ_APP or Redis URL stops the boot, not the first request;
        # redis-py connects lazily and per process, so gunicorn --preload forks no live socket.
        built = standalone_console(env, redis_timeout=current.redis_timeout,
                                   redis_url=env.get("LOWKIQ_WEB_REDIS_URL") or None)
        state.console_factory = lambda: built
    if current.proxies:
        # Behind reverse proxies: the client's address, scheme, host and the path prefix they mount the
        # console at (X-Forwarded-Prefix, when it is a plain path), so links, cookies, redirects and
        # origin checks use them.
        app.wsgi_app = proxy.behind_proxies(app.wsgi_app, int(current.proxies))  # type: ignore[method-assign]
    security.install(app)
    app.register_blueprint(bp)
    app.context_processor(template_context)  # the error pages of unrouted requests use the layout too

    # What the blueprint's handlers do for its routes, for requests that match none (404, 405,
    # a refusal before routing): the same JSON on the API, and the same headers (install()).
    @app.errorhandler(security.Refused)
    def refused(error: security.Refused) -> tuple[Response | str, int]:
        return error_response(error.status, error.message)

    @app.errorhandler(404)
    def not_found(error: HTTPException) -> Any:
        what = "endpoint" if "/api/" in request.path else "page"
        return error_response(404, f"no such {what}: {request.path}")

    @app.errorhandler(405)
    def not_allowed(error: MethodNotAllowed) -> Response:
        return not_allowed_response(error)

    return app


def served_app(config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Flask:
    """``create_app()`` for a process that serves the console and nothing else (``lowkiq web``, gunicorn).

    It also takes what start-up built (modules, the app, its templates) out of the garbage
    collector's full collections (``gc.freeze``). Otherwise every few dozen requests one of them
    walks all of it, about 15 ms on a 2-core machine: the stats endpoint's p99 was five times its
    p50 for that alone. Not for a process that builds apps again and again (tests): what it held
    when frozen is never collected.

    Example::

        gunicorn -w 2 --threads 4 -b 127.0.0.1:8000 "lowkiq.webui:served_app()"
    """
    app = create_app(config, environ)
    gc.freeze()
    return app
