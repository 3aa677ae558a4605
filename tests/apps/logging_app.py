"""An app that sets up logging itself, as an app with an error tracker does: ``logging.basicConfig`` with its
own format, and a handler that, like Sentry's logging integration, keeps each ERROR record's exception. Its
worker ``Boom`` raises for every job."""

from __future__ import annotations

import json
import logging
import os
import traceback

import lowkiq


class Tracker(logging.Handler):
    """Writes each ERROR record with its exc_info to APP_TRACKER_FILE, one JSON line each."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.ERROR:
            return
        frames = traceback.format_exception(*record.exc_info) if record.exc_info else []
        with open(os.environ["APP_TRACKER_FILE"], "a") as out:
            out.write(json.dumps({"logger": record.name, "message": record.getMessage(),
                                  "exception": "".join(frames)}) + "\n")


logging.basicConfig(level=logging.INFO, format="APPFORMAT %(levelname)s %(name)s: %(message)s")
logging.getLogger().addHandler(Tracker())


def deep_in_the_app(payload):
    raise KeyError(f"account missing in {payload}")


class Boom(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 3

    def retry_in(self, retry_count):
        return 60

    def perform(self, payloads_by_id):
        for payloads in payloads_by_id.values():
            deep_in_the_app(payloads[-1])


lowkiq.configure(workers=[Boom])
