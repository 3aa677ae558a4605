"""Safety of the console: CSRF tokens, origin checks, read-only mode, basic auth, headers.

CSRF tokens are bound to a browser session: a random session id, kept in the host
app's Flask session when it has one (``SECRET_KEY`` set: logging out, which clears
the session, voids every token), else in a cookie signed by the console's secret.
A form's token is HMAC(secret, session id). No server-side store is needed, so
several gunicorn workers accept each other's tokens as long as they share the secret:
``LOWKIQ_WEB_SECRET_KEY`` (or the host app's ``SECRET_KEY``), else a random key
stored once in Redis. Every unsafe request must also come from the console's own
origin (``Sec-Fetch-Site``, ``Origin``). API posts need no token: they must be
``application/json``, which no cross-site form can send, and no CORS is ever granted;
or have no body and no Content-Type at all, which a form cannot be either (it always
sends a type). A page's script can send such a post cross-site (``fetch``, ``sendBeacon``),
but every browser then sends ``Origin`` (and today ``Sec-Fetch-Site``), which must be the
console's own; older browsers that sent neither still sent a ``Referer``, checked for these.

The standalone console without a password answers only loopback ``Host`` names and
``LOWKIQ_WEB_ALLOWED_HOSTS`` (``hosts``): DNS rebinding would otherwise make an attacker's
page same-origin with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import secrets
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, jsonify, request, session, url_for

from ..console import signing_secret
from . import hosts, proxy
from .settings import ConsoleSettings
from .state import settings, state

log = logging.getLogger("lowkiq.webui")

CSRF_COOKIE = "lowkiq_csrf"
CSRF_FIELD = "csrf_token"
SESSION_KEY = "_lowkiq_csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Requests a browser made from the console's own pages, or typed by hand.
ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})
DEFAULT_PORTS = {"http": 80, "https": 443}

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)


class Refused(Exception):
    """A request refused for safety; the API answers JSON, pages answer HTML."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ---- secret and CSRF ------------------------------------------------------


def secret_key() -> bytes:
    configured = settings().secret_key or current_app.config.get("SECRET_KEY")
    if configured:
        return configured.encode() if isinstance(configured, str) else bytes(configured)
    st = state()
    if st.stored_secret_key is None:
        st.stored_secret_key = signing_secret.stored(st.console(settings().redis_timeout))
    if not st.stored_secret_key:  # deleted between the two commands: never sign with an empty key
        raise RuntimeError(f"the console's secret {signing_secret.key_name()!r} vanished from Redis; reload the page")
    return st.stored_secret_key


def _sign(purpose: str, value: str) -> str:
    return hmac.new(secret_key(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def _uses_host_session() -> bool:
    return bool(current_app.secret_key)


def _session_id(create: bool) -> str | None:
    """This browser session's id: from the host's session, else from the signed cookie."""
    if _uses_host_session():
        sid = session.get(SESSION_KEY)
        if not isinstance(sid, str) and create:
            sid = session[SESSION_KEY] = secrets.token_hex(16)
        return sid if isinstance(sid, str) else None
    sid = g.get("lowkiq_new_session") or _cookie_session_id()
    if sid is None and create:
        sid = g.lowkiq_new_session = secrets.token_hex(16)
    return sid


def _cookie_session_id() -> str | None:
    """The session id of a cookie the console signed; None for a missing or forged one."""
    sid, _, signature = request.cookies.get(CSRF_COOKIE, "").partition(".")
    if sid and signature and hmac.compare_digest(_sign("session", sid), signature):
        return sid
    return None


def csrf_token() -> str:
    """The token for this browser session's forms; starts the session on first use."""
    return _sign("csrf", _session_id(create=True))  # type: ignore[arg-type]


def check_csrf() -> None:
    sid = _session_id(create=False)
    token = request.form.get(CSRF_FIELD, "")
    if not sid or not token or not hmac.compare_digest(_sign("csrf", sid), token):
        raise Refused(403, "The form's security token is missing or stale: reload the page and try again.")


# ---- request guards ----------------------------------------------------


def check_host(standalone: bool) -> None:
    """The ``Host`` must be loopback or in LOWKIQ_WEB_ALLOWED_HOSTS: always when that is set, and
    on a standalone console without a password (DNS rebinding, see ``hosts``). Else a 400 saying how to allow it."""
    current = settings()
    if not current.allowed_hosts and not (standalone and current.password is None):
        return  # a mounted blueprint follows its host app (TRUSTED_HOSTS); a password stops rebinding
    g.lowkiq_checks_hosts = True
    if not hosts.is_allowed(request.host, current.allowed_hosts):
        raise Refused(400, hosts.refusal(request.host, current.password is not None))


def check_prefix() -> None:
    """A 400 when a trusted proxy sent an X-Forwarded-Prefix that is not a plain path (``proxy``)."""
    value = proxy.refused_prefix(request.environ)
    if value is not None:
        shown = value[:100].encode("unicode_escape").decode("ascii")
        raise Refused(400, f"X-Forwarded-Prefix {shown!r} is not a path like /jobs (one leading '/', no '//', "
                           "'..', '\\', scheme, query or control character): fix the proxy's configuration.")


def check_unsafe_request(api: bool) -> None:
    """Every POST: same-origin, not read-only, and a CSRF token (forms) or JSON or no body at all (API)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ALLOWED_FETCH_SITES:
        raise Refused(403, f"Cross-site request refused (Sec-Fetch-Site: {site}).")
    origin = request.headers.get("Origin")
    if origin is not None and not _allowed_origin(origin, settings()):
        raise Refused(403, f"Cross-origin request refused (Origin: {origin}).")
    if settings().readonly:
        raise Refused(403, "The console is read-only.")
    if not api:
        check_csrf()
    elif request.mimetype == "application/json":
        return
    elif _bodyless():
        _check_referer()
    else:
        raise Refused(415, "POST needs Content-Type: application/json (or no body and no Content-Type), "
                           f"got {request.mimetype or 'none'!r}.")


def _bodyless() -> bool:
    """No Content-Type, no body: what ``curl -X POST`` sends, and no HTML form can (a form always has a type)."""
    environ = request.environ
    return (not environ.get("CONTENT_TYPE") and str(environ.get("CONTENT_LENGTH") or "0") == "0"
            and "HTTP_TRANSFER_ENCODING" not in environ)


def _check_referer() -> None:
    """For bodyless posts: a browser old enough to send neither Origin nor Sec-Fetch-Site sent a Referer."""
    referer = request.headers.get("Referer")
    if referer is None:
        return
    try:
        parts = urlsplit(referer)
    except ValueError:
        parts = None
    if parts is None or not _allowed_origin(f"{parts.scheme}://{parts.netloc}", settings()):
        raise Refused(403, f"Cross-origin request refused (Referer: {referer[:200]}).")


def _allowed_origin(origin: str, current: ConsoleSettings) -> bool:
    """The console's own host (as the browser addressed it), or one of LOWKIQ_WEB_TRUSTED_ORIGINS.

    Where ``check_host`` applies, the origin's host must also be one it allows: the same test
    as the ``Host``, so that a name that slipped past one does not pass the other.
    """
    if origin in current.trusted_origins:
        return True
    theirs = _host_port(origin)
    if theirs is None:  # "null" (a sandboxed frame, a file://) or garbage
        return False
    if g.get("lowkiq_checks_hosts") and not hosts.is_allowed(theirs[0], current.allowed_hosts):
        return False
    scheme = urlsplit(origin).scheme
    ours = _host_port(f"{scheme}://{request.host}")
    return ours == theirs


def _host_port(origin: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def add_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "lowkiq.static":
        # Queue contents change every second and may be sensitive: never cache.
        response.headers["Cache-Control"] = "no-store"
    new_session = g.get("lowkiq_new_session")
    if new_session:
        g.lowkiq_new_session = None  # once, even when the app's hook runs after the blueprint's
        response.set_cookie(
            CSRF_COOKIE,
            f"{new_session}.{_sign('session', new_session)}",
            path=url_for("lowkiq.dashboard"),
            httponly=True,
            samesite="Strict",
            secure=request.is_secure,
        )
    return response


# ---- basic auth ----------------------------------------------------------------


def check_auth() -> Response | None:
    """When LOWKIQ_WEB_PASSWORD is set, a 401 unless the request carries those credentials."""
    current = settings()
    if current.password is None or g.get("lowkiq_authenticated"):
        return None
    given_user, given_password = _credentials(request.headers.get("Authorization", ""))
    # Both comparisons always run, in constant time, so timing reveals neither.
    user_ok = hmac.compare_digest(given_user, current.user.encode())
    password_ok = hmac.compare_digest(given_password, current.password.encode())
    if user_ok and password_ok:
        g.lowkiq_authenticated = True
        return None
    response = (jsonify(error="authentication required") if _wants_json()
                else Response("Authentication required.\n", mimetype="text/plain"))
    response.status_code = 401
    response.headers["WWW-Authenticate"] = 'Basic realm="lowkiq", charset="UTF-8"'
    return response


def _credentials(header: str) -> tuple[bytes, bytes]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return b"", b""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return b"", b""
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else (b"", b"")


def _wants_json() -> bool:
    return "/api/" in request.path


# ---- the standalone app ---------------------------------------------------------


def loopback_only(environ: Mapping[str, Any]) -> bool:
    """Whether the server that took this request listens on loopback or a Unix socket only.

    gunicorn and werkzeug's server put their bind address in SERVER_NAME (not the Host
    header) and the connection in ``gunicorn.socket`` / ``werkzeug.socket``. Other servers
    may fill SERVER_NAME from the Host header: then the console cannot tell, and treats
    the address as public.
    """
    connection = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
    if getattr(connection, "family", None) == getattr(socket, "AF_UNIX", None):
        return True
    name = str(environ.get("SERVER_NAME", "")).strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_exposure() -> None:
    """No password on a non-loopback address: refused, unless LOWKIQ_WEB_ALLOW_NO_AUTH says so (then a warning)."""
    current = settings()
    if current.password is not None or loopback_only(request.environ):
        return
    address = request.environ.get("SERVER_NAME", "?")
    st = state()
    if current.allow_no_auth:
        if not st.warned_no_auth:
            st.warned_no_auth = True
            log.warning("the lowkiq console serves %s without a password (LOWKIQ_WEB_ALLOW_NO_AUTH): "
                        "whoever reaches it can act on every queue", address)
        return
    if not st.warned_no_auth:
        st.warned_no_auth = True
        log.error("the lowkiq console refuses requests: it has no password and listens on %s", address)
    raise Refused(403, f"This console has no password and listens on {address}, not on loopback only: "
                       "set LOWKIQ_WEB_PASSWORD, bind 127.0.0.1, or set LOWKIQ_WEB_ALLOW_NO_AUTH=1 when a proxy "
                       "in front of it authenticates.")


def install(app: Flask) -> None:
    """Hooks the standalone app adds around the blueprint: auth and exposure checks, headers on every response."""

    @app.before_request
    def _standalone_guard() -> Response | None:
        if request.endpoint == "lowkiq.healthz":
            return None  # open to probes: see webui/health.py
        check_prefix()
        check_host(standalone=True)
        denied = check_auth()
        if denied is not None:
            return denied
        check_exposure()
        return None

    app.after_request(add_headers)
