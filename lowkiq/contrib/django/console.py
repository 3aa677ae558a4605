"""The console as a Django project serves it: lowkiq's Flask blueprint in a Flask app of its own, which
``views`` calls as a WSGI app with the request's environ.

What the Django request knows reaches it through that environ: the signed-in user, whom the audit log
names (the console's ``LOWKIQ_WEB_CURRENT_USER`` hook), and the Django session, where the console keeps
the id its form tokens are bound to: logging out of Django voids them, and the console sets no session
cookie of its own.
"""

from __future__ import annotations

import threading

from django.utils.crypto import salted_hmac
from flask import Flask, Request, Response, request
from flask.sessions import SecureCookieSession, SessionInterface, SessionMixin

from lowkiq.webui import blueprint
from lowkiq.webui.security import add_headers

from . import conf

# Keys of the WSGI environ that the view fills in for the console.
USER = "lowkiq.contrib.django.user"
SESSION = "lowkiq.contrib.django.session"
# The console's session data inside the Django session.
SESSION_KEY = "_lowkiq_console"

_app: Flask | None = None
_lock = threading.Lock()


class DjangoSession(SessionInterface):
    """Flask's ``session`` for the console, stored in the request's Django session."""

    def open_session(self, app: Flask, request: Request) -> SessionMixin:
        stored = request.environ[SESSION].get(SESSION_KEY)
        return SecureCookieSession(stored if isinstance(stored, dict) else {})

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if session.modified:
            request.environ[SESSION][SESSION_KEY] = dict(session)


def current_user() -> str | None:
    """The Django user the view let in: the console's hook for its audit log."""
    user = request.environ.get(USER)
    return user if isinstance(user, str) else None


def app() -> Flask:
    """The console's Flask app, built on first use; it follows the process's ``lowkiq.configure``."""
    global _app
    if _app is None:
        with _lock:
            if _app is None:
                _app = build()
    return _app


def build() -> Flask:
    console = Flask("lowkiq.contrib.django", static_folder=None)
    console.config.update(conf.console_settings())
    # Signs the console's form tokens; derived from Django's SECRET_KEY, so rotating that rotates this.
    console.config["SECRET_KEY"] = salted_hmac("lowkiq.contrib.django.console", "secret").hexdigest()
    console.config["LOWKIQ_WEB_CURRENT_USER"] = current_user
    console.session_interface = DjangoSession()
    # Mounted at the root of this app: the view puts the project's mount path in SCRIPT_NAME.
    console.register_blueprint(blueprint)
    console.after_request(add_headers)  # the console's headers on this app's own 404s and 405s too
    return console
