"""lowkiq in the app, the way a Flask extension is set up: ``init_app(app)`` from the app factory."""

from flask import redirect, request, url_for

import lowkiq
from lowkiq.webui import blueprint as console

from . import auth
from .workers import OrdersWorker


def init_app(app):
    options = {"workers": [OrdersWorker]}
    if app.config.get("LOWKIQ_REDIS_URL"):
        options["redis_url"] = app.config["LOWKIQ_REDIS_URL"]
    lowkiq.configure(**options)
    # Who acted, in the console's audit log: the app's signed-in user.
    app.config["LOWKIQ_WEB_CURRENT_USER"] = auth.current_user
    app.before_request(console_needs_login)
    app.register_blueprint(console, url_prefix="/lowkiq")


def console_needs_login():
    # The console has no login of its own: the app's guards every page, asset and API call of it.
    if request.blueprint == "lowkiq" and auth.current_user() is None:
        return redirect(url_for("auth.login", next=request.full_path if request.query_string else request.path))
    return None
