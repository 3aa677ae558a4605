"""The console in a Django project: a view that hands the request to the console's WSGI app.

    urlpatterns = [path("lowkiq/", include("lowkiq.contrib.django.urls"))]

Staff users only (``is_staff``): anyone else signed in gets 403, an anonymous visitor the login page.
A project with other rules writes its own view around ``serve``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from . import console as console_app

Headers = list[tuple[str, str]]


# Django's CSRF check would ask the console's forms for Django's token, which they do not carry, and
# would read the body before the console does. The console checks its own: every form carries a token
# bound to this session, and every API post must be JSON or bodiless and same-origin (docs/console.md).
@csrf_exempt
def console(request: HttpRequest, path: str) -> HttpResponseBase:
    user = request.user
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not (user.is_active and user.is_staff):
        raise PermissionDenied("the lowkiq console is for staff users")
    return serve(request, path)


def serve(request: HttpRequest, path: str) -> HttpResponseBase:
    """The console's answer to ``request``; ``path`` is what follows the console's mount point."""
    status, headers, body = _call(console_app.app(), environ(request, path))
    code, _, reason = status.partition(" ")
    response: HttpResponseBase
    if any(name.lower() == "content-length" for name, _ in headers):
        try:
            content = b"".join(body)
        finally:
            _close(body)
        response = HttpResponse(content, status=int(code), reason=reason or None)
    else:  # a stream (the export): Django passes it on, and closes it when done
        response = StreamingHttpResponse(body, status=int(code), reason=reason or None)
    given: set[str] = set()
    for name, value in headers:
        if name.lower() == "set-cookie":
            response.cookies.load(value)  # Django's headers hold one value per name; cookies are kept apart
        elif name.lower() in given:  # a header given twice (Vary): one comma-separated list
            response[name] = f"{response[name]}, {value}"
        else:
            response[name] = value
            given.add(name.lower())
    return response


def environ(request: HttpRequest, path: str) -> dict[str, Any]:
    """The request's WSGI environ as the console sees it: mounted at the URL that matched, below
    Django's own SCRIPT_NAME, with the body Django read (a middleware may have read it first)."""
    mount = request.path[: len(request.path) - len(path)].rstrip("/")
    body = request.body
    found = dict(request.environ)
    found.pop("HTTP_TRANSFER_ENCODING", None)  # the body is whole now, its length known
    found.update({
        "SCRIPT_NAME": _wsgi_text(mount),
        "PATH_INFO": "/" + _wsgi_text(path),
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        console_app.USER: request.user.get_username(),
        console_app.SESSION: request.session,
    })
    return found


def _wsgi_text(text: str) -> str:
    """WSGI's form of a decoded path: its UTF-8 bytes as Latin-1 characters (PEP 3333)."""
    return text.encode("utf-8").decode("latin-1")


def _call(app: Callable[..., Iterable[bytes]], env: dict[str, Any]) -> tuple[str, Headers, Iterable[bytes]]:
    started: list[tuple[str, Headers]] = []

    def start_response(status: str, headers: Headers, exc_info: Any = None) -> Callable[[bytes], None]:
        started[:] = [(status, headers)]
        return _no_write

    body = app(env, start_response)  # Flask starts its response before it returns the body
    [(status, headers)] = started
    return status, list(headers), body


def _no_write(data: bytes) -> None:
    raise RuntimeError("the console's WSGI app wrote through write(), which this bridge does not support")


def _close(body: Iterable[bytes]) -> None:
    close = getattr(body, "close", None)
    if close is not None:
        close()
