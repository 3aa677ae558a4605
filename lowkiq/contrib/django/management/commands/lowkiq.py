"""``python manage.py lowkiq``: the lowkiq server for the workers of ``settings.LOWKIQ``.

The same server and options as ``lowkiq -r app.py`` (``lowkiq.cli``), with the app Django's start-up
configured instead of an app file: ``python manage.py lowkiq --threads 8 --metrics-port 9108``.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

import lowkiq
from lowkiq import cli


class Command(BaseCommand):
    help = ("Run a lowkiq server for the workers of settings.LOWKIQ, with the options of lowkiq -r. TERM or INT "
            "finish the batches in flight, hand the shards over and exit.")

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_server_options(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        code = cli.serve(argparse.Namespace(**options), [], configured=lowkiq.current, app_name="settings.LOWKIQ")
        if code:
            raise SystemExit(code)
