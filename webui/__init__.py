"""The ops console: a Flask blueprint and a standalone app.

Mount it in any Flask app (it uses that process's ``lowkiq.configure``)::

    from lowkiq.webui import blueprint
    app.register_blueprint(blueprint, url_prefix="/lowkiq")

or run it alone::

    gunicorn "lowkiq.webui:served_app()"

(``create_app()`` builds the same app without touching the process's garbage collector.)
"""

from . import (  # noqa: F401 - they register their routes on the blueprint
    api,
    audit_view,
    export,
    groups_view,
    health,
    hot_view,
    pause_view,
    prometheus,
    schedules_view,
    servers,
    stale,
    stats_view,
    views,
)
from .app import create_app, served_app
from .blueprint import bp as blueprint

__all__ = ["blueprint", "create_app", "served_app"]
