r"""How the server's log lines look: text for people, or one JSON object per line for log shippers.

Lines about a batch or a shard carry their facts as fields (``extra={"lowkiq": {...}}``:
worker, shard, ids, thread, error...). The text format keeps its sentence; the JSON
format puts the fields beside the message, so a shipper can index them without
parsing English.

User data (a job's error, its payload, an exception raised by ``perform`` or
``retries_exhausted``, a message of the app's own loggers) reaches log lines, and
must neither forge a line nor drive the operator's terminal. In the text format:

- a record's first line starts with its time; every further line (a traceback, a
  thread dump, a newline inside a message) is indented by two spaces, so nothing a
  message holds can start a line of its own;
- control characters (ESC, CR, NUL, tab...), line and paragraph separators and
  bidi overrides (U+202E...) are written escaped: ``\x1b``, ``\r``, ``\x00``, ``\u202e``;
- a line about a batch or a shard (one with fields) stays one line: its newlines are
  escaped too (``\n``).

The JSON format is one line per record whatever it holds; the characters above are
written as JSON escapes (``\u001b``, ``\u202e``), so a JSON log read in a terminal
is as safe.
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


# What starts every further line of a record in the text format.
CONTINUATION = "  "


def continued(text: str) -> str:
    """``text`` with its control characters escaped and every line after the first indented by
    ``CONTINUATION``: however many lines it spans, none can pass for a record of its own."""
    if "\n" not in text:
        return visible(text)
    return ("\n" + CONTINUATION).join(visible(line) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``; a line about a batch or a shard (one with fields) stays one line whatever
    its error text holds. A traceback follows on its own lines, and so does a message that is many
    lines by design (the thread dump): indented, and escaped as the module's docstring says."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # logging.Formatter.format, but escaping the whole record (the logger's and the thread's
        # names are the app's too), and without caching the traceback on the record: another
        # handler's formatter must not reuse text escaped for this one, nor this one raw text.
        record.message = record.getMessage()
        if hasattr(record, "lowkiq"):
            record.message = visible(record.message)
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        parts = [self.formatMessage(record)]
        if record.exc_info:
            parts.append(self.formatException(record.exc_info))
        elif record.exc_text:
            parts.append(record.exc_text)
        if record.stack_info:
            parts.append(self.formatStack(record.stack_info))
        return continued("\n".join(parts))


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
        return json_visible(json.dumps(out, ensure_ascii=False, default=str))


def json_visible(line: str) -> str:
    """A JSON text with what ``json.dumps`` leaves raw (DEL, C1 controls, separators, bidi
    overrides) written as ``\\uXXXX`` escapes: the same JSON value, nothing a terminal obeys.
    Outside strings JSON holds ASCII punctuation only, so every such character is inside one."""
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in line)


def configure_logging(level: str, form: str) -> None:
    """The server's root logging: ``form`` is "text" or "json", on stderr."""
    logging.basicConfig(level=level, handlers=[_stderr(form)])


def _stderr(form: str) -> logging.Handler:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    return handler


class AppLogging:
    """The server's logging around loading the app file: the app's own set-up wins.

    While the app loads, lowkiq's records go to stderr through a handler of the ``lowkiq`` logger, leaving
    the root logger untouched, so that an app's ``logging.basicConfig(...)`` (or ``dictConfig``) takes effect.
    ``loaded()`` then removes that handler and configures the root logger as ``--log-level`` and
    ``--log-format`` say only when the app left it without handlers; otherwise lowkiq's records go where the
    app sends everything else."""

    def __init__(self, level: str, form: str) -> None:
        self.level, self.form = level, form
        self.logger = logging.getLogger("lowkiq")
        self.handler = _stderr(form)
        self.logger.addHandler(self.handler)
        self.logger.setLevel(level)
        self.done = False

    def loaded(self) -> bool:
        """Done loading: True when lowkiq configured the root logger, False when the app had."""
        if self.done:
            return not logging.getLogger().handlers
        self.done = True
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(logging.NOTSET)
        if logging.getLogger().handlers:
            return False
        configure_logging(self.level, self.form)
        return True
