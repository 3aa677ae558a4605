"""Safety of the console: CSRF tokens, origin checks, read-only mode, basic auth, headers.

CSRF uses a signed double-submit cookie: the browser holds a random value in
an HttpOnly, SameSite=Strict cookie, and every form carries HMAC(secret, value).
No server-side session is needed, so several gunicorn workers accept each
other's tokens as long as they share the secret: ``LOWKIQ_WEB_SECRET_KEY``
(or the host app's ``SECRET_KEY``), else a random key stored once in Redis.
API posts need no token: they must be ``application/json``, which no
cross-site form can send, and no CORS is ever granted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Callable

from flask import Flask, Response, current_app, g, jsonify, request, url_for

from ..queue.keys import webui_secret_string
from .state import state

CSRF_COOKIE = "lowkiq_csrf"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Requests a browser made from the console's own pages, or typed by hand.
ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})

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
    st = state()
    if st.secret_key is None:
        configured = current_app.config.get("LOWKIQ_WEB_SECRET_KEY") or current_app.config.get("SECRET_KEY")
        if configured:
            st.secret_key = configured.encode() if isinstance(configured, str) else bytes(configured)
        else:
            client = st.console().client
            key = webui_secret_string()
            client.set(key, secrets.token_hex(32), nx=True)
            st.secret_key = client.get(key)
    return st.secret_key  # type: ignore[return-value]


def _sign(value: str) -> str:
    return hmac.new(secret_key(), value.encode(), hashlib.sha256).hexdigest()


def csrf_token() -> str:
    """The token for this browser's forms; sets the cookie on first use."""
    value = request.cookies.get(CSRF_COOKIE)
    if not value:
        value = g.get("lowkiq_new_csrf") or secrets.token_hex(32)
        g.lowkiq_new_csrf = value
    return _sign(value)


def check_csrf() -> None:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    token = request.form.get(CSRF_FIELD, "")
    if not cookie or not token or not hmac.compare_digest(_sign(cookie), token):
        raise Refused(403, "The form's security token is missing or stale: reload the page and try again.")


# ---- request guards ----------------------------------------------------


def check_unsafe_request(api: bool) -> None:
    """Every POST: same-origin, not read-only, and a CSRF token (forms) or JSON (API)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ALLOWED_FETCH_SITES:
        raise Refused(403, f"Cross-site request refused (Sec-Fetch-Site: {site}).")
    if state().readonly:
        raise Refused(403, "The console is read-only.")
    if api:
        if request.mimetype != "application/json":
            raise Refused(415, f"POST needs Content-Type: application/json, got {request.mimetype or 'none'!r}.")
    else:
        check_csrf()


def add_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "lowkiq.static":
        # Queue contents change every second and may be sensitive: never cache.
        response.headers["Cache-Control"] = "no-store"
    new_cookie = g.get("lowkiq_new_csrf")
    if new_cookie:
        response.set_cookie(
            CSRF_COOKIE,
            new_cookie,
            path=url_for("lowkiq.dashboard"),
            httponly=True,
            samesite="Strict",
            secure=request.is_secure,
        )
    return response


# ---- basic auth (standalone app) -----------------------------------------------


def basic_auth_guard(user: str, password: str) -> Callable[[], Response | None]:
    """A before_request hook asking for HTTP basic auth with these credentials."""
    expected_user, expected_password = user.encode(), password.encode()

    def guard() -> Response | None:
        given_user, given_password = _credentials(request.headers.get("Authorization", ""))
        # Both comparisons always run, in constant time, so timing reveals neither.
        user_ok = hmac.compare_digest(given_user, expected_user)
        password_ok = hmac.compare_digest(given_password, expected_password)
        if user_ok and password_ok:
            return None
        response = jsonify(error="authentication required") if _wants_json() else Response("Authentication required.\n", mimetype="text/plain")
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Basic realm="lowkiq", charset="UTF-8"'
        response.headers["Cache-Control"] = "no-store"
        return response

    return guard


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


def install(app: Flask) -> None:
    """Hooks the standalone app adds around the blueprint (basic auth)."""
    password = app.config.get("LOWKIQ_WEB_PASSWORD")
    if password:
        app.before_request(basic_auth_guard(app.config.get("LOWKIQ_WEB_USER") or "admin", password))
