"""Trusting reverse proxies (``LOWKIQ_WEB_PROXIES``), and only for what they may say.

werkzeug's ``ProxyFix`` takes the client's address, scheme, host and the path prefix the
proxy mounts the console at from ``X-Forwarded-*``. The prefix becomes ``SCRIPT_NAME``,
the start of every link, cookie path and redirect the console makes, and ProxyFix takes it
as it comes: ``//evil.example`` would turn each redirect into one to another site (a
scheme-relative URL), ``/a/../..`` would climb out of the mount. So the prefix ProxyFix
would pick must be a plain path first; when it is not, it is dropped before ProxyFix sees
it and the request is refused (400) by ``check_prefix``, with pages whose links use the
prefix the server gave.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from werkzeug.middleware.proxy_fix import ProxyFix

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

PREFIX_HEADER = "HTTP_X_FORWARDED_PREFIX"
# Where the refused value waits for check_prefix: the WSGI layer has no error pages of its own.
REFUSED_PREFIX = "lowkiq.refused_forwarded_prefix"
# Segments of RFC 3986 path characters; "?", "#", "\" and control characters are not among them.
PATH = re.compile(r"^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*/?$")


def safe_prefix(value: str) -> bool:
    """Whether ``value`` is a path a console may be mounted at: ``/jobs``, ``/ops/jobs/``, or empty.

    It starts with a single "/", has no empty, "." or ".." segment, no scheme, no backslash, no
    control character, no query or fragment, also once its %-escapes are decoded (a browser
    reads ``%2e%2e`` as ``..``).
    """
    if value in ("", "/"):
        return True
    if not PATH.match(value):
        return False
    decoded = unquote(value)
    if any(c in decoded for c in "\\?#") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        return False
    return all("//" not in text and "." not in text.split("/") and ".." not in text.split("/")
               for text in (value, decoded))


def chosen(header: str, trusted: int) -> str | None:
    """The value ProxyFix takes from a comma-separated ``X-Forwarded-*`` header: the one the
    ``trusted``-th proxy from us added; None when fewer proxies added one (ProxyFix ignores it then)."""
    values = [part.strip() for part in header.split(",")]
    return values[-trusted] if len(values) >= trusted else None


class SafePrefix:
    """WSGI middleware in front of ProxyFix: an ``X-Forwarded-Prefix`` that is not a plain path never reaches it."""

    def __init__(self, app: WSGIApplication, trusted: int) -> None:
        self.app = app
        self.trusted = trusted

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        header = environ.get(PREFIX_HEADER)
        if header is not None:
            value = chosen(header, self.trusted)
            if value is not None and not safe_prefix(value):
                del environ[PREFIX_HEADER]
                environ[REFUSED_PREFIX] = value
        return self.app(environ, start_response)


def behind_proxies(app: WSGIApplication, trusted: int) -> Any:
    """``app`` taking the client's address, scheme, host, port and prefix from ``trusted`` proxies."""
    fixed = ProxyFix(app, x_for=trusted, x_proto=trusted, x_host=trusted, x_port=trusted, x_prefix=trusted)
    return SafePrefix(fixed, trusted)


def refused_prefix(environ: WSGIEnvironment) -> str | None:
    """The ``X-Forwarded-Prefix`` SafePrefix dropped from this request, if it dropped one."""
    value = environ.get(REFUSED_PREFIX)
    return value if isinstance(value, str) else None
