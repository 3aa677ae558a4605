"""The app file of the lowkiq server: lowkiq -r lowkiq_app.py

Building the web app configures lowkiq, so the server gets the workers and Redis the web app enqueues to.
"""

from shop import create_app

create_app()
