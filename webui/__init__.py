"""The ops console: a Flask blueprint and a standalone app.

Mount it in any Flask app (it uses that process's ``lowkiq.configure``)::

    from lowkiq.webui import blueprint
    app.register_blueprint(blueprint, url_prefix="/lowkiq")

or run it alone::

    gunicorn "lowkiq.webui:create_app()"
"""

from . import (  # noqa: F401 - they register their routes on the blueprint
    api,
    audit_view,
    export,
    pause_view,
    prometheus,
    servers,
    stale,
    views,
)
from .app import create_app
from .blueprint import bp as blueprint

__all__ = ["blueprint", "create_app"]
