"""What every route module of the console needs, and none takes from another: JSON replies, full pages with
the flash the last action left, the redirect that leaves one, and the checked way back to the page a form
was on."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from flask import Response, make_response, redirect, render_template, request, url_for
from werkzeug.urls import iri_to_uri
from werkzeug.wrappers.response import Response as BaseResponse

from ..console import WorkerView
from ..console.listing import BadInput
from ..options import integer
from . import formatting

FLASH_COOKIE = "lowkiq_flash"
PAGE_SIZES = (25, 50, 100)


def reply(data: Any, status: int = 200) -> Response:
    # Custom payload loaders may return objects JSON cannot show: use their repr.
    body = json.dumps(data, ensure_ascii=False, default=repr)
    return Response(body, status=status, mimetype="application/json")


def page(template: str, status: int = 200, **context: Any) -> Response:
    """A full page, with the flash left by the last action (then forgotten)."""
    flash = request.cookies.get(FLASH_COOKIE)
    response = make_response(render_template(template, flash=flash, page_sizes=PAGE_SIZES, **context), status)
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path=url_for(".dashboard"))
    return response


def flash_back(back: str, message: str) -> BaseResponse:
    response = redirect(back, code=303)
    response.set_cookie(FLASH_COOKIE, message, path=url_for(".dashboard"), max_age=60, httponly=True, samesite="Strict")
    return response


def back(view: WorkerView) -> str:
    """Where the form came from, a path under the console's prefix; the worker's page when not given.

    Raises BadInput for anything else: another site, a path outside the console, control
    characters (a Location header cannot carry them), a backslash or a ".." segment.
    """
    given = request.form.get("next", "")
    if not given:
        return url_for(".enqueued", worker=view.name)
    target = iri_to_uri(given)  # a Location header carries ASCII only
    parts = urlsplit(target)
    root = url_for(".dashboard")
    inside = not parts.scheme and not parts.netloc and parts.path.startswith(root) and not target.startswith("//")
    if not inside or formatting.FORM_UNSAFE.search(given) or "\\" in given or ".." in parts.path.split("/"):
        raise BadInput(f"next must be a path under {root} without control characters, '\\' or '..', got {given[:200]!r}")
    return target


def int_arg(name: str, default: int, low: int, high: int) -> int:
    """The query parameter ``name``, a whole number from ``low`` to ``high`` (``default`` when absent).

    BadInput names it otherwise. Only ASCII digits: "²" is a digit to ``str.isdigit``, and ``int()`` refuses it.
    """
    text = request.args.get(name)
    if text is None:
        return default
    try:
        value = integer(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise BadInput(f"{name} must be a whole number from {low} to {high}, got {text[:50]!r}")
    return value


def body_object() -> dict[str, Any] | None:
    """The JSON object the request's body holds; None when it has none. BadInput names what is wrong."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadInput(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadInput("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise BadInput(f"the body must be a JSON object, got {type(body).__name__}")
    return body


def no_parameters(path: str) -> None:
    """BadInput unless the body is empty or {}: an action that takes no parameters was sent some."""
    body = body_object()
    if body:
        raise BadInput(f"{path} takes no parameters, got {sorted(body)}")
