"""The standalone console: ``gunicorn "lowkiq.webui:create_app()"``, configured from the environment.

- ``LOWKIQ_REDIS_URL`` / ``REDIS_URL``: the Redis to watch (else the embedded one in ./.lowkiq/)
- ``LOWKIQ_APP=path/to/app.py``: run the app file and use its ``lowkiq.configure`` (workers,
  serializers); without it, workers are found in the registry servers and clients keep in Redis
- ``LOWKIQ_WEB_PASSWORD`` (and ``LOWKIQ_WEB_USER``, default "admin"): HTTP basic auth
- ``LOWKIQ_WEB_READONLY=1``: hide and refuse every action
- ``LOWKIQ_WEB_POLL_INTERVAL``: seconds between the dashboard's live refreshes (default 3)
- ``LOWKIQ_WEB_SECRET_KEY``: signs CSRF tokens; unset, a random key is kept in Redis so that
  every gunicorn worker shares it
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from . import security
from .blueprint import bp
from .console import standalone_console
from .state import init_app

TRUE = {"1", "true", "yes", "on"}


def create_app(config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Flask:
    """The console alone, dashboard at "/". ``config`` overrides what the environment says.

    Example::

        gunicorn -w 2 --threads 4 -b 0.0.0.0:8000 "lowkiq.webui:create_app()"
    """
    env = dict(os.environ if environ is None else environ)
    # No app-level /static: the blueprint serves its own assets under its prefix.
    app = Flask("lowkiq.webui", static_folder=None)
    app.config.update(
        LOWKIQ_WEB_READONLY=env.get("LOWKIQ_WEB_READONLY", "").lower() in TRUE,
        LOWKIQ_WEB_PASSWORD=env.get("LOWKIQ_WEB_PASSWORD") or None,
        LOWKIQ_WEB_USER=env.get("LOWKIQ_WEB_USER") or "admin",
        LOWKIQ_WEB_SECRET_KEY=env.get("LOWKIQ_WEB_SECRET_KEY") or None,
        LOWKIQ_WEB_POLL_INTERVAL=float(env.get("LOWKIQ_WEB_POLL_INTERVAL") or 3.0),
    )
    app.config.update(config or {})
    state = init_app(app)
    if state.console_factory is None:
        # Built now so that a bad LOWKIQ_APP or Redis URL stops the boot, not the first request;
        # redis-py connects lazily and per process, so gunicorn --preload forks no live socket.
        built = standalone_console(env)
        state.console_factory = lambda: built
    security.install(app)
    app.register_blueprint(bp)

    @app.errorhandler(404)
    def not_found(error: HTTPException) -> Any:
        if "/api/" in request.path:
            return jsonify(error=f"no such endpoint: {request.path}"), 404
        return error

    @app.errorhandler(405)
    def not_allowed(error: HTTPException) -> Any:
        if "/api/" in request.path:
            return jsonify(error=f"{request.method} is not allowed on {request.path}"), 405
        return error

    return app
