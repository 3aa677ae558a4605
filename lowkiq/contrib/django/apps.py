"""The Django app: configures lowkiq from ``settings.LOWKIQ`` when Django starts."""

from __future__ import annotations

from django.apps import AppConfig

from . import conf


class LowkiqConfig(AppConfig):
    name = "lowkiq.contrib.django"
    label = "lowkiq"
    verbose_name = "lowkiq"

    def ready(self) -> None:
        # Every process of the project (web workers, manage.py lowkiq, the shell) enqueues through the same
        # configuration; redis-py connects on first use, so a pre-forking server shares no socket.
        conf.configure()
