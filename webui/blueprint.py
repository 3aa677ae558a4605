"""The Flask blueprint: its folders, its safety hooks and its error pages.

Every error a request can meet answers with its status and a message that names the
problem: JSON ``{"error": ...}`` on the API, an HTML page elsewhere.

Routes live in ``views`` (pages) and ``api`` (JSON); both register on ``bp``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import cast

import redis
from flask import Blueprint, Flask, Response, current_app, jsonify, render_template, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed, RequestEntityTooLarge

from .. import __version__
from ..console import UnknownWorker
from ..console.listing import BadInput
from . import formatting, security, settings, state

HERE = Path(__file__).resolve().parent


def _folder(name: str) -> str:
    """templates/ or static/, in either layout setup.cfg's package_dir produces.

    Installed from a wheel they are lowkiq/webui/<name>/ (packages lowkiq.webui.<name>);
    in the source tree, which an editable install imports, they sit beside webui/.
    """
    for folder in (HERE / name, HERE.parent / name):
        if folder.is_dir():
            return str(folder)
    return str(HERE / name)


bp = Blueprint(
    "lowkiq",
    __name__,
    template_folder=_folder("templates"),
    static_folder=_folder("static"),
    # Not "/static": at url_prefix "/" the host app's own /static would shadow it.
    static_url_path="/lowkiq-static",
)


log = logging.getLogger("lowkiq.webui")
# Where Redis says a script failed (its hash and line: nothing an operator can use), as 7.x
# appends it and as 6.2 prefixes it.
SCRIPT_ERROR_PLACE = re.compile(r" script: [0-9a-f]{40}, on @user_script:\d+\.$"
                                r"|^Error running script \(call to f_[0-9a-f]{40}\): @user_script:\d+: ")


@bp.record_once
def _init(setup: BlueprintSetupState) -> None:
    state.init_app(cast(Flask, setup.app))  # a Flask app: register_blueprint is Flask's
    # What the host app has configured so far must be valid now (a bad value fails its start);
    # the settings are read again on every request, so values set later are honoured too.
    settings.from_config(setup.app.config)


HEALTH_ENDPOINT = "lowkiq.healthz"


def is_api() -> bool:
    endpoint = request.endpoint
    if endpoint is None:  # not routed (404, 405): judge by the path
        return "/api/" in request.path
    return endpoint.startswith("lowkiq.api_")


@bp.before_request
def _guard() -> Response | None:
    if request.endpoint == HEALTH_ENDPOINT:
        return None  # probes carry no password and any Host; the answer reveals nothing (webui/health.py)
    current = state.settings()
    _limit_body(current.max_content_length)
    security.check_host(standalone=False)  # the standalone app checked it already; a host app, when set
    denied = security.check_auth()
    if denied is not None:
        return denied
    if request.method not in security.SAFE_METHODS:
        security.check_unsafe_request(api=is_api())
    return None


def _limit_body(limit: int) -> None:
    """The console's body limit, unless the host app set a smaller one."""
    app_limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if isinstance(app_limit, int) and 0 < app_limit < limit:
        limit = app_limit
    request.max_content_length = limit
    if request.content_length is not None and request.content_length > limit:
        raise RequestEntityTooLarge()


@bp.after_request
def _headers(response: Response) -> Response:
    return security.add_headers(response)


@bp.context_processor
def template_context() -> dict[str, object]:
    current = state.settings()
    return {
        "fmt": formatting,
        "readonly": current.readonly,
        "csrf_token": security.csrf_token,
        "csrf_field": security.CSRF_FIELD,
        "poll_interval": current.poll_interval,
        "version": __version__,
        "redis_label": _redis_label,
        "here": here,
    }


def here() -> str:
    """This page's path and query as the browser addressed it, for forms to come back to.

    ``request.full_path`` leaves out the prefix a proxy mounts the app at (SCRIPT_NAME,
    X-Forwarded-Prefix): a form returning there would land outside the console.
    """
    query = request.query_string.decode("latin-1")
    return request.script_root + request.path + (f"?{query}" if query else "")


def _redis_label() -> str:
    """Which Redis the console watches (host:port/db or the embedded one's folder), never a password."""
    from ..runtime import NotConfigured

    try:
        return state.console().redis_label
    except NotConfigured:
        return ""


# Read by Prometheus and curl, not by people in a browser: their errors are one line of text.
PLAIN_TEXT_ENDPOINTS = frozenset({"lowkiq.metrics"})


def error_response(status: int, message: str) -> tuple[Response | str, int]:
    if is_api():
        return jsonify(error=message), status
    if request.endpoint in PLAIN_TEXT_ENDPOINTS:
        return Response(f"{message}\n", mimetype="text/plain"), status
    return render_template("lowkiq/error.html", status=status, message=message), status


def not_allowed_response(error: MethodNotAllowed) -> Response:
    """A 405 with its ``Allow`` header (RFC 9110 requires it), which werkzeug puts only on its own page."""
    response = current_app.make_response(error_response(405, f"{request.method} is not allowed on {request.path}"))
    if error.valid_methods:
        response.headers["Allow"] = ", ".join(sorted(error.valid_methods))
    return response


@bp.errorhandler(security.Refused)
def refused(error: security.Refused) -> tuple[Response | str, int]:
    return error_response(error.status, error.message)


@bp.errorhandler(UnknownWorker)
def _unknown_worker(error: UnknownWorker) -> tuple[Response | str, int]:
    return error_response(404, str(error))


@bp.errorhandler(BadInput)
def _bad_request(error: BadInput) -> tuple[Response | str, int]:
    return error_response(400, str(error))


@bp.errorhandler(RequestEntityTooLarge)
def too_large(error: RequestEntityTooLarge) -> tuple[Response | str, int]:
    limit = request.max_content_length
    return error_response(413, f"the request body is larger than the console accepts ({limit:,} bytes)"
                          if limit else "the request body is too large")


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException) -> Response | tuple[Response | str, int] | HTTPException:
    if error.code is None or error.code < 400:
        return error
    if isinstance(error, MethodNotAllowed):
        return not_allowed_response(error)
    return error_response(error.code, error.description or error.name)


@bp.errorhandler(settings.SettingError)
def _bad_setting(error: settings.SettingError) -> tuple[Response | str, int]:
    log.error("lowkiq console: %s", error)
    return error_response(500, f"The console is misconfigured: {error}")


@bp.errorhandler(redis.RedisError)
def _redis_down(error: redis.RedisError) -> tuple[Response | str, int]:
    # An operator must see why the page is empty, not a bare 500.
    if isinstance(error, redis.ResponseError):
        log.warning("lowkiq console: Redis refused a request: %s", error)
        return error_response(503, f"Redis refused the request: {SCRIPT_ERROR_PLACE.sub('', str(error))}")
    if isinstance(error, redis.TimeoutError):
        timeout = state.settings().redis_timeout
        return error_response(503, f"Redis did not answer within {timeout:g} s (LOWKIQ_WEB_REDIS_TIMEOUT): {error}")
    return error_response(503, f"Redis did not answer: {error}")
