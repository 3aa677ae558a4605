"""The Flask blueprint: its folders, its safety hooks and its error pages.

Routes live in ``views`` (pages) and ``api`` (JSON); both register on ``bp``.
"""

from __future__ import annotations

import os

import redis
from flask import Blueprint, Response, jsonify, render_template, request
from flask.blueprints import BlueprintSetupState

from .. import __version__
from . import formatting, security, state
from .console import UnknownWorker
from .listing import BadInput

HERE = os.path.dirname(os.path.abspath(__file__))

bp = Blueprint(
    "lowkiq",
    __name__,
    # Installed as lowkiq.webui.templates and lowkiq.webui.static (see setup.cfg).
    template_folder=os.path.join(HERE, "templates"),
    static_folder=os.path.join(HERE, "static"),
    # Not "/static": at url_prefix "/" the host app's own /static would shadow it.
    static_url_path="/lowkiq-static",
)


@bp.record_once
def _init(setup: BlueprintSetupState) -> None:
    state.init_app(setup.app)


def is_api() -> bool:
    return (request.endpoint or "").startswith("lowkiq.api_")


@bp.before_request
def _guard() -> None:
    if request.method not in security.SAFE_METHODS:
        security.check_unsafe_request(api=is_api())


@bp.after_request
def _headers(response: Response) -> Response:
    return security.add_headers(response)


@bp.context_processor
def _context() -> dict[str, object]:
    st = state.state()
    return {
        "fmt": formatting,
        "readonly": st.readonly,
        "csrf_token": security.csrf_token,
        "csrf_field": security.CSRF_FIELD,
        "poll_interval": st.poll_interval,
        "version": __version__,
    }


def _error(status: int, message: str) -> tuple[Response | str, int]:
    if is_api():
        return jsonify(error=message), status
    return render_template("lowkiq/error.html", status=status, message=message), status


@bp.errorhandler(security.Refused)
def _refused(error: security.Refused) -> tuple[Response | str, int]:
    return _error(error.status, error.message)


@bp.errorhandler(UnknownWorker)
def _unknown_worker(error: UnknownWorker) -> tuple[Response | str, int]:
    return _error(404, str(error))


@bp.errorhandler(BadInput)
def _bad_request(error: BadInput) -> tuple[Response | str, int]:
    return _error(400, str(error))


@bp.errorhandler(redis.RedisError)
def _redis_down(error: redis.RedisError) -> tuple[Response | str, int]:
    # An operator must see why the page is empty, not a bare 500.
    return _error(503, f"Redis did not answer: {error}")
