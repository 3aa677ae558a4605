"""How the server's log lines look: text for people, or one JSON object per line for log shippers.

Lines about a batch or a shard carry their facts as fields (``extra={"lowkiq": {...}}``:
worker, shard, ids, thread, error...). The text format keeps its sentence; the JSON
format puts the fields beside the message, so a shipper can index them without
parsing English.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"
FORMATS = ("text", "json")
# Ids listed in a line's fields at most: a batch of 1,000 ids must not make a 20 KB line.
MAX_IDS = 50


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call: ``log.error("...", extra=fields(worker="Orders", shard=3, ids=ids))``."""
    ids = values.get("ids")
    if isinstance(ids, list) and len(ids) > MAX_IDS:
        values["ids"] = ids[:MAX_IDS]
        values["ids_total"] = len(ids)
    return {"lowkiq": values}


def visible(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\r``, ``\\x1b``): a job's error or payload
    must not forge log lines, nor move the cursor or recolour an operator's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``; a line about a batch or a shard (one with fields) stays one line whatever
    its error text holds. A traceback still follows on its own lines, and so does a message that
    is many lines by design (the thread dump)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        if hasattr(record, "lowkiq"):
            record.message = visible(record.message)  # format() sets it afresh for each handler
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, thread, message, the record's
    fields, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        extra = getattr(record, "lowkiq", None)
        if isinstance(extra, dict):
            for key, value in extra.items():
                out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str, form: str) -> None:
    """The server's root logging: ``form`` is "text" or "json", on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler])
