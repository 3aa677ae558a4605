"""The shop's own sign-in, standing in for whatever the app already has (Flask-Login and the like)."""

import os

from flask import Blueprint, current_app, redirect, render_template_string, request, session, url_for
from werkzeug.security import check_password_hash, generate_password_hash

bp = Blueprint("auth", __name__)

LOGIN_PAGE = """<!doctype html><title>Sign in</title>
<form method="post"><input name="name" placeholder="name"> <input name="password" type="password">
<input type="hidden" name="next" value="{{ next }}"><button>Sign in</button></form>
{% if failed %}<p>Wrong name or password.</p>{% endif %}"""


def users_from_environment():
    """SHOP_ADMIN_PASSWORD=... lets "admin" sign in, to try the example."""
    password = os.environ.get("SHOP_ADMIN_PASSWORD")
    return {"admin": generate_password_hash(password)} if password else {}


def current_user():
    return session.get("user")


@bp.route("/login", methods=["GET", "POST"])
def login():
    next_page = request.values.get("next", "")
    if not next_page.startswith("/") or next_page.startswith(("//", "/\\")):  # only back into this site
        next_page = url_for("lowkiq.dashboard")
    if request.method == "POST":
        stored = current_app.config["USERS"].get(request.form.get("name", ""))
        if stored and check_password_hash(stored, request.form.get("password", "")):
            session.clear()  # a new session at sign-in: nothing from before carries over
            session["user"] = request.form["name"]
            return redirect(next_page)
        return render_template_string(LOGIN_PAGE, next=next_page, failed=True), 401
    return render_template_string(LOGIN_PAGE, next=next_page, failed=False)


@bp.post("/logout")
def logout():
    session.clear()  # also voids the console's form tokens, which it keeps in this session
    return redirect(url_for("auth.login"))
