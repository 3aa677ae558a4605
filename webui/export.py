"""Export of a listing (the morgue or the queue, its filter applied, content filters too) as JSON Lines or
CSV, streamed.

Ids are read in chunks of EXPORT_CHUNK in the listing's order, their jobs fetched
EXPORT_FETCH at a time, each cut in Redis to EXPORT_ROW_BYTES of payloads (a row
says what was cut in its ``clipped`` field), so an export of a million dead jobs
of any size holds at most a few MB at a time. The file is a download (Content-Disposition: attachment), never
rendered as a page. CSV cells that a spreadsheet would read as a formula are
prefixed with a quote.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis
from flask import Response, request, stream_with_context

from ..console import listing
from ..console.listing import BadInput
from ..console.terms import ENQUEUED_ORDERS, MORGUE_ORDERS
from ..jobs import Job, MorgueJob
from ..transport import TopologyError
from .blueprint import bp
from .state import console

EXPORT_CHUNK = 500
# Jobs fetched per round trip, and the payload bytes each carries at most: 100 x 64 KB keeps one
# round trip under 7 MB, where 500 jobs of 1 MB once took an export to 1.9 GB. Larger than a
# listing row's cap (4 KB): an export is for reading the payloads; a job cut here is whole on its page.
EXPORT_FETCH = 100
EXPORT_ROW_BYTES = 64 * 1024
EXPORT_ERROR_BYTES = 16 * 1024
FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}
# Cells starting with these run as formulas in spreadsheets (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _payloads(job: Job | MorgueJob) -> list[list[Any]]:
    return [[payload, score] for payload, score in job.payloads]


def enqueued_row(job: Job) -> dict[str, Any]:
    return {"id": job.id, "payloads": _payloads(job), "perform_in": job.perform_in, "retry_count": job.retry_count,
            "error": job.error, **_clipped(job)}


def morgue_row(job: MorgueJob) -> dict[str, Any]:
    return {"id": job.id, "payloads": _payloads(job), "updated_at": job.updated_at, "error": job.error,
            **_clipped(job)}


def _clipped(job: Job | MorgueJob) -> dict[str, Any]:
    """What the export cut from the job (absent when it is whole): its page shows it up to 1 MB."""
    return {"clipped": job.clipped.as_json()} if job.clipped else {}


def _json(value: Any) -> str:
    # Payloads of a custom load_payload may not be JSON: their repr, as the API shows them.
    return json.dumps(value, ensure_ascii=False, default=repr)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    text = value if isinstance(value, str) else _json(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def lines(rows: Iterator[dict[str, Any]], form: str, columns: Sequence[str]) -> Iterator[str]:
    """The file, a line (JSONL) or a CSV row at a time; a Redis failure midway ends it with a line saying so."""
    if form == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)

        def row_text(values: Sequence[Any]) -> str:
            buffer.seek(0)
            buffer.truncate()
            writer.writerow(values)
            return buffer.getvalue()

        yield row_text(columns)
    try:
        for row in rows:
            yield _json(row) + "\n" if form == "jsonl" else row_text([_cell(row.get(c)) for c in columns])
    except (redis.RedisError, TopologyError, OSError) as exc:
        problem = f"export stopped: Redis failed ({type(exc).__name__}: {exc}); the file is incomplete"
        yield _json({"error": problem}) + "\n" if form == "jsonl" else row_text([problem])


def _rows(ids: Iterator[list[str]], fetch: Callable[..., Sequence[Any]],
          row: Callable[[Any], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for chunk in ids:
        for start in range(0, len(chunk), EXPORT_FETCH):
            for job in fetch(chunk[start:start + EXPORT_FETCH], cap=EXPORT_ROW_BYTES, error_cap=EXPORT_ERROR_BYTES):
                yield row(job)


def _export(worker: str, area: str) -> Response:
    form = request.args.get("format", "jsonl")
    if form not in FORMATS:
        raise BadInput(f"format must be one of {', '.join(FORMATS)}, got {form[:40]!r}")
    c = console()
    view = c.worker(worker)
    q = c.queries(view)
    if area == "morgue":
        args = listing.parse(request.args, MORGUE_ORDERS, default_order="updated_at", default_limit=1)
        ids = q.morgue_ids(args.order_by, min=args.min or None, max=args.max or None, chunk=EXPORT_CHUNK)
        columns: Sequence[str] = ("id", "payloads", "updated_at", "error", "clipped")
    else:
        args = listing.parse(request.args, ENQUEUED_ORDERS, default_order="perform_in", default_limit=1)
        ids = q.enqueued_ids(args.order_by, min=args.min or None, max=args.max or None, chunk=EXPORT_CHUNK)
        columns = ("id", "payloads", "perform_in", "retry_count", "error", "clipped")
    if args.content:
        # What the content-filtered page shows: the search's ids, shard by shard, by id in each (the sort does
        # not apply), found in short steps.
        ids = c.matching_ids(view, area, args.content, args.order_by, min=args.min or None, max=args.max or None)
    rows = _rows(ids, q.morgue_jobs, morgue_row) if area == "morgue" else _rows(ids, q.jobs, enqueued_row)
    # Read the first chunk now: a bad filter or a Redis that does not answer is an error page, not a file.
    first = next(rows, None)
    everything = rows if first is None else _prepend(first, rows)
    name = f"{view.name}-{'dead' if area == 'morgue' else 'enqueued'}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    body = stream_with_context(lines(everything, form, columns))
    response = Response(body, mimetype=FORMATS[form])
    response.headers["Content-Disposition"] = f'attachment; filename="{name}.{form}"'
    return response


def _prepend(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield first
    yield from rest


@bp.get("/workers/<worker>/morgue/export")
def export_morgue(worker: str) -> Response:
    return _export(worker, "morgue")


@bp.get("/workers/<worker>/enqueued/export")
def export_enqueued(worker: str) -> Response:
    return _export(worker, "enqueued")
