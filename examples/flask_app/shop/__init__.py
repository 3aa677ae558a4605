"""A small Flask shop: enqueues order syncs from a route, and mounts lowkiq's console at /lowkiq for its
signed-in users.

    flask --app shop run         # the web app; the console at http://127.0.0.1:5000/lowkiq/
    lowkiq -r lowkiq_app.py      # the lowkiq server, configured as the web app is
"""

import os

from flask import Flask

from . import auth, lowkiq_ext, orders


def create_app(config=None):
    app = Flask(__name__)
    app.config.from_mapping(
        SECRET_KEY=os.environ.get("SHOP_SECRET_KEY", "dev-only-secret"),  # signs sessions and the console's tokens
        LOWKIQ_REDIS_URL=os.environ.get("LOWKIQ_REDIS_URL"),  # None: the embedded Redis, for trying things out
        USERS=auth.users_from_environment(),  # name -> password hash
    )
    app.config.update(config or {})
    app.register_blueprint(auth.bp)
    app.register_blueprint(orders.bp)
    lowkiq_ext.init_app(app)
    return app
