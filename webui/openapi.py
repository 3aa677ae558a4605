"""The OpenAPI 3.1 document of the JSON API, served at ``api/v1/openapi.json``.

It is built from the values the routes themselves parse with (orders, limits, the
operations and their ``Actions`` methods), so a new operation or ordering shows up
here without a second edit. Tests check that its paths are exactly the API's routes
and that real answers match its schemas; a route added elsewhere fails them until it
is described here.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Iterable
from typing import Any

from .. import __version__
from ..console import AREA_ORDERS, MATCHING_VERBS
from ..console.finding import SEARCH_HISTORY_ENTRIES, SEARCH_WORKERS
from ..console.listing import API_PAGE_SIZE, MAX_SEARCHED_ID, TIME_ORDERS
from ..console.operations import MAX_IDS, OPERATIONS, RETRY_NOW, Operation
from ..console.terms import (
    ENQUEUED_ORDERS,
    HISTORY_KINDS,
    IDS_KEPT,
    MAX_LIMIT,
    MAX_NEEDLE,
    MORGUE_ORDERS,
    PAGE_EXAMINED,
    Actions,
)
from ..jobs import MAX_TAG_LENGTH
from ..options import FALSE_WORDS, TRUE_WORDS
from . import openapi_groups_stats
from .minute_chart import WINDOWS as HISTORY_WINDOWS
from .security import ALLOWED_FETCH_SITES

OPENAPI_VERSION = "3.1.0"
API = "/api/v1"
# As audit_view.api_audit parses ?limit=.
AUDIT_DEFAULT_LIMIT = 100
AUDIT_MAX_LIMIT = 1000

Json = dict[str, Any]

DESCRIPTION = f"""\
The JSON API of the lowkiq console. Paths are relative to the console's prefix, which
`servers` gives as this document was requested.

**Authentication.** When `LOWKIQ_WEB_PASSWORD` is set, every request needs HTTP basic
auth (user `LOWKIQ_WEB_USER`, `admin` by default), else 401. A console mounted in a host
app without that setting has no login of its own: the host app's authentication applies.
A standalone console with no password that listens on a non-loopback address refuses
every request with 403 unless `LOWKIQ_WEB_ALLOW_NO_AUTH` is set.

**Actions** (every POST) must:

- send `Content-Type: application/json`, even with an empty body (else 415); this is what
  makes cross-site forms unable to reach them, so no CSRF token is needed, and no CORS is
  ever granted;
- come from the console's own origin (else 403): a `Sec-Fetch-Site` header, when sent, must be
  {" or ".join(f"`{site}`" for site in sorted(ALLOWED_FETCH_SITES))}; an `Origin` header, when sent, must be
  the console's own (scheme, host and port as the request addressed it) or one of
  `LOWKIQ_WEB_TRUSTED_ORIGINS`;
- find the console writable: in read-only mode (`LOWKIQ_WEB_READONLY`) they answer 403.
  GET never changes anything and is allowed in read-only mode.

Every action is recorded in the audit log (`api/v1/audit`) with source `api`.

**Errors** are `{{"error": "..."}}` naming the problem: 400 bad input, 401 no or wrong
credentials, 403 refused (see above), 404 unknown worker or job, 405 a method the path does not
take, 413 a body over `LOWKIQ_WEB_MAX_CONTENT_LENGTH`, 415 not JSON, 500 a bad console setting,
503 Redis did not answer or refused. A console mounted in a host app answers 404 and 405 of
unrouted requests with the host app's own handlers.

Responses are never cached (`Cache-Control: no-store`)."""


def document(server_url: str, *, basic_auth: bool) -> Json:
    """The document for a console reached at ``server_url``; ``basic_auth`` when it requires a password."""
    doc: Json = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "lowkiq console API", "version": __version__, "description": DESCRIPTION},
        "servers": [{"url": server_url, "description": "The console's prefix, as this document was requested."}],
        "paths": paths(),
        "components": {
            "schemas": {**SCHEMAS, **openapi_groups_stats.SCHEMAS},
            "parameters": {**PARAMETERS, **openapi_groups_stats.PARAMETERS},
            "responses": ERROR_RESPONSES,
            "securitySchemes": {
                "basicAuth": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "Required on every request when LOWKIQ_WEB_PASSWORD is set "
                                   "(user LOWKIQ_WEB_USER). Send it over HTTPS only.",
                }
            },
        },
    }
    if basic_auth:
        doc["security"] = [{"basicAuth": []}]
    # The tables above are shared by every document: a caller may change its own copy.
    return copy.deepcopy(doc)


# ---- schemas --------------------------------------------------------------------------------


def ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def _schema(name: str) -> Json:
    return ref("schemas", name)


def _nullable(schema: Json) -> Json:
    return {"oneOf": [schema, {"type": "null"}]}


def _object(properties: Json, description: str = "", *, optional: Iterable[str] = ()) -> Json:
    """An object with exactly these properties, all required but ``optional``."""
    out: Json = {
        "type": "object",
        "required": [name for name in properties if name not in set(optional)],
        "properties": properties,
        "additionalProperties": False,
    }
    if description:
        out["description"] = description
    return out


COUNT = {"type": "integer", "minimum": 0}
# The filter of a "matching" action, as a listing reads it (its action's verbs depend on the area: see paths()).
MATCHING_FILTER: Json = {
    "action": {"type": "string", "description": "On dead jobs: requeue or delete; on queued jobs: delete, kill or "
                                                "perform_now."},
    "order_by": {"type": "string", "description": "The filter's field, as the listing's order_by."},
    "min": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}],
            "description": "The lowest value kept, inclusive; absent, null or '' is open. By id any text; by a number "
                           "or time order a number, `-inf`, or for a time a date (as the listing's min)."},
    "max": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}],
            "description": "The highest value kept, inclusive; absent, null or '' is open. By id any text; by a "
                           "number or time order a number, `+inf`, or for a time a date (as the listing's max)."},
}
# A content filter's value: a plain substring (or, for error_class, the exact class), never empty.
NEEDLE: Json = {"type": "string", "minLength": 1, "maxLength": MAX_NEEDLE, "pattern": "^[^\\u0000]*$"}
CONTENT_FILTER: Json = {
    "error_class": {**NEEDLE, "description": "Only jobs whose error's class (its text before the first ':', as in "
                                             "'TimeoutError: ...') is this."},
    "error": {**NEEDLE, "description": "Only jobs whose error text (not its traceback) contains this, as plain text."},
    "payload": {**NEEDLE, "description": "Only jobs with a payload whose stored (serialized, JSON by default) bytes "
                                         "contain this, as plain text."},
}
# Whether the content filters compare letters as given (a matching action's body); by default they ignore case.
MATCH_CASE: Json = {"match_case": {"type": "boolean", "default": False,
                                   "description": "Compare the content filters' letters as given; false or absent "
                                                  "ignores case (ASCII letters: 'timeout' finds 'TimeoutError')."}}
SECONDS = {"type": "number", "minimum": 0}
# A busy shard's perform, as the dashboard's band names it.
PERFORM: Json = {"worker": {"type": "string"}, "shard": COUNT, "server": {"type": ["string", "null"]},
                 "thread": {"type": ["string", "null"]}, "running_for": {"type": "number", "minimum": 0}}


def _items(properties: Json, description: str) -> Json:
    return {"type": "array", "items": _object(properties), "description": description}


UNIX_TIME = {"type": "number", "description": "Unix time, in seconds, from Redis's clock."}
TEXT = {"type": "string"}
TAG_FILTER = {"tag": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH,
                      "description": "Only the jobs whose id carries this tag (docs/tags.md), counted from the tag "
                                     "index; alone (no min, max or content filter), else 400."}}
TAGS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH}}

SCHEMAS: Json = {
    "Error": _object({"error": {"type": "string", "description": "The problem, naming the parameter or field to fix."},
                      "reason": {"enum": ["used", "expired", "unknown", "mismatch"],
                                 "description": "Why a bulk action's confirmation token was refused (only then)."}},
                     "Every error the API answers.", optional=("reason",)),
    "PayloadEntry": {
        "type": "array",
        "description": "One payload of the job and its score. The payload is what the worker's load_payload "
                       "returns; a value JSON cannot represent is shown as its Python repr().",
        "prefixItems": [{"description": "The payload."}, {"type": "number", "description": "Its score."}],
        "minItems": 2,
        "maxItems": 2,
    },
    "Job": _object(
        {
            "id": TEXT,
            "payloads": {"type": "array", "items": _schema("PayloadEntry"), "description": "Ascending by score."},
            "perform_in": {**UNIX_TIME, "description": "When the job is due: unix time, from Redis's clock."},
            "retry_count": {"type": "integer", "minimum": -1,
                            "description": "-1 until the job first fails, then how many times it has failed, less one."},
            "error": {"type": ["string", "null"], "description": "The last failure's error; null when it never failed."},
            "traceback": {"type": ["string", "null"], "description": "The failure's traceback, capped at the "
                          "server's traceback_limit; null when none was stored. Only in job lookups, not in listings."},
            "clipped": _schema("Clipped"),
        },
        "A job in the queue or in processing.",
        optional=["traceback", "clipped"],
    ),
    "DeadJob": _object(
        {
            "id": TEXT,
            "payloads": {"type": "array", "items": _schema("PayloadEntry"), "description": "Ascending by score."},
            "updated_at": {**UNIX_TIME, "description": "When the job was last written to the morgue."},
            "error": {"type": ["string", "null"], "description": "The error that killed the job."},
            "traceback": {"type": ["string", "null"], "description": "The failure's traceback, capped at the "
                          "server's traceback_limit; null when none was stored. Only in job lookups, not in listings."},
            "clipped": _schema("Clipped"),
        },
        "A job in the morgue: never processed until requeued.",
        optional=["traceback", "clipped"],
    ),
    "Clipped": _object(
        {
            "payloads": {**COUNT, "description": "Payloads the job holds."},
            "payloads_shown": {**COUNT, "description": "Of them in `payloads`; the last one may be cut, shown "
                               "as its head and a note."},
            "payloads_bytes": {**COUNT, "description": "Bytes of the job's stored payload list."},
            "cap_bytes": {**COUNT, "description": "Bytes of payloads this read carried at most: 4,096 per row of "
                          "a listing, 65,536 per row of an export, 1 MB for one job's lookup."},
            "error_bytes": {**COUNT, "description": "Bytes of the stored error and traceback when they were cut "
                            "too (the error ends with a note saying so), else 0."},
        },
        "What a read cut from the job, in Redis, to stay under its byte cap. Absent when the job was read whole.",
    ),
    "Cursor": {
        "type": "string",
        # A finite number, then ":": what Cursor.decode reads (at most 20 digits and a two-digit exponent,
        # so the number never overflows to an infinity, which a listing refuses).
        "pattern": "^[-+]?([0-9]{1,20}(\\.[0-9]{0,20})?|\\.[0-9]{1,20})([eE][-+]?[0-9]{1,2})?:",
        "description": "A row's place in a listing, `<score>:<id>`. Pass it back unchanged as `after` or `before`, "
                       "with the same order_by, desc, min and max.",
        "examples": ["1700000000.0:1042"],
    },
    "JobPage": _object(
        {
            "jobs": {"type": "array", "items": _schema("Job")},
            "next": {**_nullable(_schema("Cursor")), "description": "Pass as `after` for the next page; null on the last."},
            "previous": {**_nullable(_schema("Cursor")),
                         "description": "Pass as `before` for the previous page; null on the first."},
            "scan": _schema("ScanProgress"),
            "tagged": _schema("TagProgress"),
        },
        "A page of queued jobs.", optional=("scan", "tagged"),
    ),
    "DeadJobPage": _object(
        {
            "jobs": {"type": "array", "items": _schema("DeadJob")},
            "next": {**_nullable(_schema("Cursor")), "description": "Pass as `after` for the next page; null on the last."},
            "previous": {**_nullable(_schema("Cursor")),
                         "description": "Pass as `before` for the previous page; null on the first."},
            "scan": _schema("ScanProgress"),
            "tagged": _schema("TagProgress"),
        },
        "A page of dead jobs.", optional=("scan", "tagged"),
    ),
    "TagProgress": _object(
        {
            "tag": TEXT,
            "continue": {**_nullable(TEXT), "description": "Pass as `tag_after` (with the same tag) for the next "
                                                           "page; null after the last. A page may hold fewer jobs "
                                                           "than `limit` while more follow."},
        },
        "A listing filtered by a tag (docs/tags.md): the area's ids that carry it, from the tag index, shard by "
        "shard and by id in each; `next` and `previous` are null.",
    ),
    "ScanProgress": _object(
        {
            "examined": {**COUNT, "description": "Ids this search has examined so far, all its pages together."},
            "total": {**COUNT, "description": "Ids the listed area holds now, all shards."},
            "continue": {**_nullable(TEXT), "description": "Pass as `scan` (with the same filters) for the next page; "
                                                           "null when the search is done."},
        },
        "A content search's progress (present only with error_class, error or payload): a page examines at most "
        f"{PAGE_EXAMINED:,} ids, so it may hold fewer jobs than asked while more follow.",
    ),
    "BusyJobs": _object(
        {"jobs": {"type": "array", "items": _schema("BusyJob")},
         "time_limit": {"type": ["number", "null"], "exclusiveMinimum": 0,
                        "description": "The worker's time_limit in seconds, as its registry entry says; null: none."},
         "concurrency": {"type": ["integer", "null"], "minimum": 1,
                         "description": "An async worker's concurrency (its batches at once per server process, "
                                        "docs/async.md); null: a sync worker, served by threads."}},
        "The jobs in processing now."),
    "HotId": _object(
        {"id": TEXT,
         "shard": COUNT,
         "versions": {**COUNT, "description": "Versions its pushes brought over what was read."},
         "retries": {**COUNT, "description": "Its failed tries over what was read."},
         "perform_seconds": {"type": "number", "minimum": 0,
                             "description": "Seconds from each take of its batch to the batch's acknowledgement or "
                                            "failure, summed (a batch's whole time counts for each of its ids)."}},
        "An id and its counts."),
    "HotIds": _object(
        {"worker": TEXT,
         "since": {**UNIX_TIME, "description": "The window's start: an hour before the read."},
         "by_versions": {"type": "array", "items": _schema("HotId"), "maxItems": 10,
                         "description": "The ids with the most versions enqueued, most first."},
         "by_retries": {"type": "array", "items": _schema("HotId"), "maxItems": 10,
                        "description": "The ids with the most retries, most first."},
         "by_perform_time": {"type": "array", "items": _schema("HotId"), "maxItems": 10,
                             "description": "The ids with the most perform time, most first."},
         "shards": {"type": "array", "description": "Each shard, by index.", "items": _object(
             {"shard": COUNT,
              "queued": {**COUNT, "description": "Ids queued in it."},
              "lag": {"type": "number", "minimum": 0, "description": "Seconds its oldest due id has waited."},
              "oldest_id": {**_nullable(TEXT), "description": "The id with its lowest perform_in; null: none queued."},
              "oldest_perform_in": {"type": ["number", "null"], "description": "That id's perform_in."},
              "examined": {**COUNT, "description": "History entries of the shard read."},
              "reaches_back_to": {"type": ["number", "null"], "description": "The oldest entry read."},
              "whole_window": {"type": "boolean", "description": "Whether the hour (or all the shard's history "
                                                                 "keeps) was read; false: its budget ended the walk."}},
             "One shard's lag and what was read of its history.")},
         "examined": {**COUNT, "description": "History entries read, all shards."},
         "ids_seen": {**COUNT, "description": "Distinct ids counted."},
         "whole_window": {"type": "boolean", "description": "Whether every shard was read over the whole hour."},
         "budget": _object({"entries": COUNT, "per_shard": COUNT},
                           "History entries one request reads at most, in all and per shard.")},
        "A worker's hot ids over the last hour."),
    "JobLookup": _object(
        {
            "id": TEXT,
            "queued": {**_nullable(_schema("Job")), "description": "The job in the queue, if it is there."},
            "busy": {**_nullable(_schema("Job")), "description": "The job in processing, if it is."},
            "morgue": {**_nullable(_schema("DeadJob")), "description": "The job in the morgue, if it is there."},
            "waiting": {"type": "array", "items": _schema("WaitingVersion"),
                        "description": "Versions of the id waiting for other ids (`after`, docs/dependencies.md); "
                                       "empty when none waits."},
            "dependents": {"type": "array", "items": _schema("Dependent"),
                           "description": "Versions of other ids waiting for this id's versions (their `after` "
                                          "named it when it was queued or in processing), until those are performed "
                                          "or deleted."},
            "tags": {**TAGS, "description": "The id's tags: the union of its versions' (docs/tags.md)."},
        },
        "Where an id is. One id can be queued, in processing, dead and waiting at once; at least one of queued, "
        "busy and morgue is not null, or waiting is not empty.",
    ),
    "WaitingVersion": _object(
        {
            "payload": {"description": "The version's payload, as the worker's load_payload returns it."},
            "score": {"type": "number", "description": "Its score."},
            "since": {**UNIX_TIME, "description": "When it was enqueued."},
            "perform_in": {**UNIX_TIME, "description": "Its perform_in: it is due at the later of this and its "
                                                       "release."},
            "after": {"type": "array", "items": _schema("WaitingOn"),
                      "description": "The dependencies it still waits on, as its `after` named them."},
        },
        "A version enqueued with `after`, waiting until the versions of those ids queued or in processing at its "
        "enqueue are performed or deleted.",
    ),
    "Dependent": _object(
        {
            "worker": {**TEXT, "description": "The waiting version's worker (its queue's name when the console does "
                                              "not know the worker)."},
            "id": {**TEXT, "description": "The waiting version's id."},
        },
        "A version of another id waiting for this one.",
    ),
    "WaitingOn": _object(
        {
            "worker": {**TEXT, "description": "The dependency's worker."},
            "id": {**TEXT, "description": "The dependency's id."},
            "state": {"type": "string", "enum": ["dead", "processing", "queued", "waiting", "gone", "unknown"],
                      "description": "Where that id is now: dead (in the morgue: it holds this version until it is "
                                     "requeued and performed, or deleted), processing, queued, waiting (on its own "
                                     "dependencies), gone (performed or deleted: the release is on its way), unknown "
                                     "(a worker this console does not know)."},
        },
        "A dependency a waiting version still waits on.",
    ),
    "TaggedJob": _object(
        {
            "id": TEXT,
            "tags": {**TAGS, "description": "All the id's tags: the union of its versions'."},
            "queued": {"type": "boolean", "description": "Whether the id is in the queue."},
            "busy": {"type": "boolean", "description": "Whether the id is in processing."},
            "dead": {"type": "boolean", "description": "Whether the id is in the morgue."},
        },
        "An id that carries the tag, and where its copies are (one id can be queued and dead at once).",
    ),
    "TaggedPage": _object(
        {
            "tag": TEXT,
            "jobs": {"type": "array", "items": _schema("TaggedJob"),
                     "description": "Shard by shard, by id in each shard; each id once across the pages."},
            "next": {**_nullable(TEXT), "description": "Pass as `after` for the next page; null after the last. A "
                                                      "page may hold fewer jobs than `limit` while more follow."},
        },
        "A page of the ids that carry a tag, read from each shard's tag index (its cost is the tag's ids, not "
        "the queue's size).",
    ),
    "WorkerLookup": _object(
        {
            "worker": {**TEXT, "description": "The worker's name."},
            "queued": {**_nullable(_schema("Job")), "description": "The job in the worker's queue, if it is there."},
            "busy": {**_nullable(_schema("Job")), "description": "The job in processing, if it is."},
            "morgue": {**_nullable(_schema("DeadJob")), "description": "The job in the morgue, if it is there."},
            "tags": {**TAGS, "description": "The id's tags in the worker (docs/tags.md)."},
        },
        "Where an id is in one worker, as `jobs/{job_id}` answers it; at least one of queued, busy and morgue is "
        "not null.",
    ),
    "SearchResult": _object(
        {
            "id": TEXT,
            "found": {"type": "array", "items": _schema("WorkerLookup"),
                      "description": "Each worker that holds the id, once, in the order `api/v1/dashboard` lists "
                                     "the workers; empty when none does."},
            "history": {"type": "array", "items": _schema("IdHistory"),
                        "description": "Each worker whose history holds the id (its newest 20 events): an id "
                                       "performed earlier, or deleted, is found here; empty when none does."},
            "searched": _schema("SearchProgress"),
        },
        "An id in every worker: queued, in processing, dead, and in each worker's history.",
    ),
    "SearchProgress": _object(
        {
            "from": {**COUNT, "description": "The position of the first worker searched, in `api/v1/dashboard`'s "
                                             "order."},
            "workers": {**COUNT, "description": f"Workers this request searched: at most {SEARCH_WORKERS}, fewer "
                                                f"when their histories took {SEARCH_HISTORY_ENTRIES:,} entries."},
            "of": {**COUNT, "description": "Workers the console knows."},
            "continue": {"type": ["integer", "null"], "minimum": 0,
                         "description": "Pass as `from` for the next workers; null when none is left."},
        },
        "Which workers a search looked in: a request searches a bounded number of them.",
    ),
    "IdHistoryEvent": _object(
        {
            "at": UNIX_TIME,
            "kind": {"type": "string", "enum": list(HISTORY_KINDS),
                     "description": "What happened (docs/history.md)."},
            "summary": {**TEXT, "description": "The event in one line for people."},
            "server": {**_nullable(TEXT), "description": "The member id of the server that held the id's shard."},
            "server_name": {**_nullable(TEXT), "description": "That server's host and pid while it lives, else the "
                                                             "start of its member id."},
            "thread": {**_nullable(TEXT), "description": "The server thread that held the batch."},
            "fencing_token": {**_nullable(TEXT), "description": "The holder's fencing token, `cfg_epoch:fence`."},
            "actor": {**_nullable(TEXT), "description": "Who acted, for an operator's action ('' when unknown)."},
            "retry_count": {"type": ["integer", "null"], "minimum": -1,
                            "description": "A failure's retry count after it."},
            "perform_in": {"type": ["number", "null"],
                           "description": "When due: an enqueued job's, a failure's next try (null when it died)."},
            "versions": {"type": ["integer", "null"], "minimum": 1,
                         "description": "How many versions an enqueue brought."},
            "error": {**_nullable(TEXT), "description": "A failure's error (up to 4 KB kept)."},
            "traceback": {**_nullable(TEXT), "description": "A failure's traceback (its last lines past 4 KB)."},
            "own_error": {"type": "boolean",
                          "description": "A failure: true when the error is the id's own (PartialFailure), false when "
                                         "it is its whole batch's."},
            "batch": {"type": "array", "items": TEXT, "maxItems": 20,
                      "description": "The other ids of the same step (the first 20)."},
            "batch_size": {"type": "integer", "minimum": 1, "description": "How many ids the step had."},
            "reason": {**_nullable(TEXT), "description": "Why, when it says (a takeover, a PartialFailure)."},
            "raised": {"type": "array", "items": TEXT, "maxItems": 20,
                       "description": "A step ended by a PartialFailure: the ids that raised their own error, this "
                                      "one included when it did (the first 20); empty when the whole batch failed "
                                      "together or nothing failed."},
            "tags": {**TAGS, "description": "An enqueue's (enqueued, merged, joined_dead): the tags its versions "
                                            "brought; empty otherwise."},
        },
        "One thing that happened to the id.",
    ),
    "IdHistory": _object(
        {
            "worker": TEXT,
            "id": TEXT,
            "shard": COUNT,
            "events": {"type": "array", "items": _schema("IdHistoryEvent"), "description": "Newest first."},
            "examined": {**COUNT, "description": "History entries of the id's shard read to answer."},
            "complete": {"type": "boolean",
                         "description": "Whether these are all the events the shard's history holds of the id."},
            "reaches_back_to": {**_nullable(UNIX_TIME),
                                "description": "When the oldest entry examined was written; null when none was."},
        },
        "An id's history in one worker (docs/history.md): it reaches back as far as its shard's retained entries.",
    ),
    "QueueStats": _object(
        {
            "length": {**COUNT, "description": "Ids in the queue: fresh jobs and retries."},
            "morgue_length": {**COUNT, "description": "Dead jobs."},
            "lag": {**SECONDS, "description": "Seconds since the oldest overdue job was due; 0 when none is."},
            "held": {**COUNT, "description": "Ids held in the morgue: every dead id of a worker whose morgue_policy "
                                             "is whole_id (payloads enqueued for it join it until an operator "
                                             "requeues or deletes it). Only for whole_id workers, and in total "
                                             "when there is one."},
            "groups": {"type": "object", "additionalProperties": _schema("GroupStats"), "minProperties": 1,
                       "maxProperties": 21,
                       "description": "Queued ids per group (docs/fairness.md): the 20 biggest groups by name, and "
                                      "\"(other)\" summing every other grouped id. Only in by_worker, for workers "
                                      "with grouped ids queued; jobs without a group are not in it."},
        },
        optional=["held", "groups"],
    ),
    "GroupStats": _object(
        {
            "length": {**COUNT, "description": "The group's queued ids, in every shard (exact)."},
            "lag": {**SECONDS, "description": "Seconds since the group's oldest queued id was due; 0 when none is "
                                              "due. For \"(other)\": the largest lag among the other groups each "
                                              "shard lists among its 20 biggest."},
        },
        "One group of a worker.",
    ),
    "Stats": _object(
        {
            "total": {**_schema("QueueStats"), "description": "Sums over every worker; lag is the largest."},
            "by_worker": {"type": "object", "additionalProperties": _schema("QueueStats"),
                          "description": "By worker name."},
            "broken": {"type": "object", "additionalProperties": TEXT, "minProperties": 1,
                       "description": "Registry entries the console cannot use, by name, with their problem; "
                                      "absent when there are none."},
            "not_measured": _object(
                {"workers": {"type": "array", "items": TEXT, "minItems": 1},
                 "note": {**TEXT, "description": "Why, in words."}},
                "Workers left out of by_worker and total: one read visits a bounded number of shards (see the "
                "docs/operations.md) and these did not fit. Absent when every worker was measured."),
        },
        optional=["broken", "not_measured"],
    ),
    "DashboardQueue": _object(
        {
            "name": {**TEXT, "description": "The worker's name."},
            "queue_name": TEXT,
            "shards_count": {"type": "integer", "minimum": 1},
            "lag": SECONDS,
            "processed": {**COUNT, "description": "Jobs processed, ever."},
            "dropped": {**COUNT, "description": "Payloads an opt-in per-id cap (max_payloads_per_id with "
                        "payload_overflow drop_oldest) dropped, ever; 0 without a cap."},
            "failed": {**COUNT, "description": "Failures, ever."},
            "busy": {**COUNT, "description": "Jobs in processing now."},
            "enqueued": {**COUNT, "description": "Ids in the queue: fresh + retries."},
            "fresh": {**COUNT, "description": "Queued jobs that never failed."},
            "retries": {**COUNT, "description": "Queued jobs waiting for a retry."},
            "dead": {**COUNT, "description": "Jobs in the morgue."},
            "held": {**COUNT, "description": "Dead ids the morgue holds (morgue_policy whole_id); 0 for other workers."},
            "paused": {"oneOf": [_schema("Pause"), {"type": "null"}],
                       "description": "Who paused the queue and when; null while servers take its jobs."},
            "measured": {"type": "boolean", "description": "False when the read's budget of shards left the "
                         "worker out: its numbers are zeros, not readings (its own page measures it)."},
        }
    ),
    "Pause": _object(
        {
            "at": UNIX_TIME,
            "who": {**TEXT, "description": "The basic-auth user, the host app's user, or the CLI's user."},
            "source": {**TEXT, "description": "console, api or cli."},
        },
        "A paused queue: servers take none of its jobs (enqueueing goes on) until it is resumed.",
    ),
    "PauseResult": _object(
        {
            "paused": {"type": "boolean", "description": "Whether the queue is paused now."},
            "changed": {"type": "boolean", "description": "False when it already was so."},
        }
    ),
    "DashboardTotals": _object(
        {name: COUNT for name in ("processed", "failed", "busy", "enqueued", "fresh", "retries", "dead", "held")}
        | {"lag": {**SECONDS, "description": "The largest lag."}},
        "Sums over every worker.",
    ),
    "RedisInfo": _object(
        {
            "version": {"type": ["string", "null"]},
            "uptime_in_seconds": {"type": ["integer", "null"], "minimum": 0},
            "connected_clients": {"type": ["integer", "null"], "minimum": 0},
            "used_memory": {"type": ["integer", "null"], "minimum": 0, "description": "Bytes."},
            "used_memory_human": {"type": ["string", "null"]},
            "used_memory_peak": {"type": ["integer", "null"], "minimum": 0, "description": "Bytes."},
            "used_memory_peak_human": {"type": ["string", "null"]},
            "maxmemory_policy": {"type": ["string", "null"], "description": "Of the first primary."},
            "evicting": {"type": "object", "additionalProperties": TEXT,
                         "description": "Primaries whose maxmemory-policy (an allkeys-* one) may delete queued "
                                        "jobs when Redis is full, by node name; empty when none may."},
        },
        "From Redis INFO (summed over the nodes of a cluster); null when Redis did not say.",
    ),
    "BrokenEntry": _object({"name": TEXT, "problem": TEXT}, "A registry entry the console cannot use."),
    "Dashboard": _object(
        {
            "queues": {"type": "array", "items": _schema("DashboardQueue")},
            "broken": {"type": "array", "items": _schema("BrokenEntry")},
            "totals": _schema("DashboardTotals"),
            "redis_info": _schema("RedisInfo"),
            "attention": _schema("Attention"),
        }
    ),
    "Attention": _object(
        {
            "stalled": _items({"worker": TEXT, "lag": SECONDS, "quiet_for": SECONDS},
                              "Workers with jobs due for over 60 s that completed no perform for 60 s."),
            "long_performs": _items(PERFORM, "While a worker stalls: the performs running over 60 s, longest first."),
            "over_limit": _items({**PERFORM, "limit": SECONDS},
                                 "Busy shards whose batch has run longer than its worker's time_limit."),
            "held": _items({"worker": TEXT, "ids": COUNT}, "Dead ids a morgue_policy whole_id worker holds."),
            "schedules": _items({"name": TEXT, "worker": TEXT, "job_id": TEXT,
                                 "missed_since": {"type": ["number", "null"],
                                                  "description": "When the missed tick was due; null: none missed."},
                                 "outcome": TEXT},
                                "Schedules that missed a tick (over 60 s late) or whose last run is retrying or dead."),
            "slow_groups": _items({"worker": TEXT, "group": TEXT, "lag": SECONDS, "others": SECONDS,
                                   "length": COUNT},
                                  "Groups waiting 60 s and 5 times the median of their worker's other groups."),
            "growing_morgues": _items({"worker": TEXT, "dead": COUNT, "grew": COUNT, "minutes": SECONDS},
                                      "Workers with more dead jobs than about 10 minutes ago."),
            "held_by_dead": _items({"worker": TEXT, "id": TEXT, "dependency_worker": TEXT, "dependency": TEXT},
                                   "Sampled ids waiting (after) on a dead id."),
        },
        "What needs an operator now (the dashboard's band); every list is empty when the system is calm.",
    ),
    "AuditEntry": _object(
        {
            "at": UNIX_TIME,
            "who": {**TEXT, "description": "The basic-auth user, the host app's user, or \"anonymous\" and an address."},
            "source": {**TEXT, "description": "console, api or cli (empty for an unreadable entry)."},
            "action": {**TEXT, "description": "e.g. morgue/requeue."},
            "worker": TEXT,
            "count": {**COUNT, "description": "Jobs the action touched."},
            "ids": {"type": "array", "items": TEXT, "maxItems": IDS_KEPT, "description": "The ids named, the first "
                    f"{IDS_KEPT} at most."},
            "ids_total": {**COUNT, "description": "How many ids the action named."},
            "scope": {**TEXT, "description": "What was acted on when not ids: \"all\", or a filter."},
        }
    ),
    "AuditLog": _object({"entries": {"type": "array", "items": _schema("AuditEntry"),
                                     "description": "Newest first."}}),
    "Server": _object(
        {
            "id": TEXT,
            "host": TEXT,
            "pid": {"type": "integer"},
            "threads": {"type": "integer", "minimum": 0},
            "version": {**TEXT, "description": "lowkiq's version in that process."},
            "name": {**TEXT, "description": "Its stable name (LOWKIQ_MEMBER_NAME); empty when not set."},
            "server": {**TEXT, "description": "Its one name on every page and in the API: its --name, else "
                                              "host:pid.", "examples": ["worker-7", "web-1:4121"]},
            "started_at": UNIX_TIME,
            "heartbeat_at": UNIX_TIME,
            "state": {"enum": ["serving", "waiting", "stopping"],
                      "description": "serving; waiting while its other threads wait (a bounded time) for a batch "
                                     "that was in flight when a server died, performed alone; stopping while it "
                                     "hands its shards over."},
            "waiting": {
                **_nullable({"type": "object"}),
                "description": "While waiting: the suspect batch's worker, shard and ids, the thread performing it, "
                               "since when (unix time) and for how many more seconds at most the others wait.",
            },
            "shards": {"type": "object", "additionalProperties": {"type": "array", "items": COUNT},
                       "description": "By worker name: the shards this process holds the lease of."},
            "failing_duties": {
                "type": "array",
                "items": _object({"duty": {**TEXT, "examples": ["schedule_ticks"]},
                                  "error": {**TEXT, "description": "What it raised, shortened."},
                                  "since": UNIX_TIME,
                                  "failures": {"type": "integer", "minimum": 1, "description": "Runs in a row."}},
                                 "A periodic duty whose last run failed."),
                "description": "The server's periodic duties (schedule ticks, replica counts, per-minute totals, id "
                               "history trims) whose last run raised: each is retried with a back-off while the "
                               "server keeps serving its shards.",
            },
        },
        "A live server process (`lowkiq -r`), as its last heartbeat described it.",
    ),
    "Servers": _object({"servers": {"type": "array", "items": _schema("Server")}}),
    "Schedule": _object(
        {
            "name": TEXT,
            "worker": {**TEXT, "description": "The worker whose queue each tick's job goes into."},
            "cron": {**_nullable(TEXT), "description": "The cron expression, or null for an `every` schedule."},
            "every": {**_nullable({"type": "integer", "minimum": 1}),
                      "description": "Seconds between ticks (multiples of it since the epoch), or null."},
            "timezone": {**TEXT, "description": "The IANA zone a cron expression is read in."},
            "next_at": {**_nullable(UNIX_TIME), "description": "The next tick (Redis time); null while paused."},
            "last_at": {**_nullable(UNIX_TIME), "description": "The last tick enqueued; null if none yet."},
            "paused": {"type": "boolean"},
            "rule": {**TEXT, "description": "The rule in words."},
            "id": {**TEXT, "description": "The id of the jobs it enqueues."},
            "catch_up": {"enum": ["last", "all", "none"], "description": "What it does with ticks missed while no "
                         "server ran or it was paused."},
            "last_outcome": {**_nullable(TEXT), "description": "What became of the last tick's job: queued, "
                             "retrying, performing, in the morgue, done; null if none yet."},
        },
        "A recurring schedule: each tick is enqueued once, by whichever live server sees it due first.",
    ),
    "Schedules": _object({"schedules": {"type": "array", "items": _schema("Schedule")}}),
    "SchedulePauseResult": _object(
        {"schedule": TEXT, "paused": {"type": "boolean"},
         "changed": {"type": "boolean", "description": "False when it already was so."}}
    ),
    "ScheduleRunResult": _object(
        {"schedule": TEXT, "enqueued": {"type": "boolean"},
         "scheduled_at": {**UNIX_TIME, "description": "Redis's time when it was enqueued: the job's scheduled_at."}}
    ),
    "HistoryMinute": _object(
        {
            "minute": {**UNIX_TIME, "description": "The minute's start."},
            "processed": {"type": "number", "minimum": 0, "description": "Jobs processed per minute over the row's "
                          "minutes (jobs = processed x minutes)."},
            "failed": {"type": "number", "minimum": 0, "description": "Failures per minute over the row's minutes."},
            "lag": {**SECONDS, "description": "The lag at the minute's sample (in total: the largest)."},
            "minutes": {"type": "number", "exclusiveMinimum": 0, "description": "The minutes the rates cover, up "
                        "to ``minute``: about 1 over an hour, more over longer windows, which are sampled."},
        }
    ),
    "History": _object(
        {
            "hours": {"type": "integer", "enum": list(HISTORY_WINDOWS)},
            "total": {"type": "array", "items": _schema("HistoryMinute"), "description": "Every worker together."},
            "by_worker": {"type": "object", "additionalProperties": {"type": "array", "items": _schema("HistoryMinute")},
                          "description": "By worker name."},
        }
    ),
    "ActionResult": _object({"count": {**COUNT, "description": "Jobs the action touched."}}),
    "Ids": _object(
        {
            "ids": {
                "type": "array",
                "maxItems": MAX_IDS,
                "items": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]},
                "description": "Job ids, as strings or integers (an integer is its decimal text). Ids not found "
                               "are skipped: the count says how many were touched.",
            }
        },
        "The jobs to act on.",
    ),
    "RetryNowRequest": _object(
        {"id": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}],
                "description": "The queued job's id, a string or an integer (its decimal text)."}},
        "The one queued job to make due now.",
    ),
    "StopRequest": _object(
        {"id": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}],
                "description": "The busy job's id, a string or an integer (its decimal text); its whole batch is "
                               "stopped."}},
        "The one busy job whose perform to stop.",
    ),
    "StopResult": _object(
        {"id": {**TEXT, "description": "The job asked for."},
         "stop": {"const": "requested", "description": "Written beside its shard's lease; its server acts on it "
                                                      "within about a second."},
         "note": {**TEXT, "description": "What happens next, for people."}},
        "The stop is asked.",
    ),
    "NoParameters": {"type": "object", "maxProperties": 0, "description": "An empty object, or no body at all."},
    "MatchingRequest": {"oneOf": [
        _object({**MATCHING_FILTER, **CONTENT_FILTER, **MATCH_CASE, **TAG_FILTER,
                 "dry_run": {"const": True, "description": "Count, touch nothing, answer a token."}},
                "Count the jobs the filter matches now.",
                optional=("order_by", "min", "max", *CONTENT_FILTER, *MATCH_CASE, *TAG_FILTER)),
        _object({**MATCHING_FILTER, **CONTENT_FILTER, **MATCH_CASE, **TAG_FILTER, "confirm": {
                    **TEXT, "pattern": "^[0-9]{13}-[A-Za-z0-9_-]{22}$",
                    "description": "The token a dry run of the same action and filter answered: act on the jobs it "
                                   "counted."}},
                "Act on the jobs a dry run counted.",
                optional=("order_by", "min", "max", *CONTENT_FILTER, *MATCH_CASE, *TAG_FILTER)),
    ]},
    "MatchingAnswer": {"oneOf": [
        _object({
            "count": {**COUNT, "description": "Jobs the filter matches now."},
            "confirm": {**TEXT, "description": "Confirms acting on exactly these jobs: once, within expires_in."},
            "sample": {"type": "array", "items": TEXT, "maxItems": 10, "description": "The first ids counted."},
            "expires_in": {**COUNT, "description": "Seconds the token may be used."},
        }, "A dry run's count."),
        _object({
            "touched": {**COUNT, "description": "Jobs the action touched: at most the count confirmed."},
            "counted": {**COUNT, "description": "Jobs the dry run counted."},
            "skipped": {**COUNT, "description": "Counted jobs that no longer matched (performed, moved or "
                                                "changed since) and were left alone."},
        }, "What the confirmed action did."),
    ]},
    "OpenAPIDocument": {
        "type": "object",
        "required": ["openapi", "info", "paths"],
        "properties": {"openapi": {"const": OPENAPI_VERSION}},
        "description": "This document (OpenAPI 3.1).",
    },
}
# A busy job is a Job and how long it has run: its own schema, since objects allow no other properties.
SCHEMAS["BusyJob"] = _object(
    {**SCHEMAS["Job"]["properties"],
     "running_for": {"type": ["number", "null"], "minimum": 0,
                     "description": "Seconds since its batch was taken, by Redis's clock; null when its shard's "
                                    "lease does not say."},
     "over_time_limit": {"type": "boolean",
                         "description": "Running for longer than the worker's time_limit: a thread-isolated perform "
                                        "that ignores TimeLimitExceeded keeps its shard, or a child process about "
                                        "to be killed."},
     "in_run": {"type": "boolean",
                "description": "Taken ahead with the id its shard performs now (docs/take-ahead.md): not performing "
                               "itself, waiting for its turn or for the run's acknowledgement; running_for is null."},
     "server": {**_nullable(TEXT), "description": "The server performing it (its --name, else host:pid); null when "
                                                  "its shard's lease names no live server."},
     "thread": {**_nullable(TEXT), "description": "The server thread performing it, as its shard's lease says."}},
    "A job in processing.",
    optional=["traceback", "clipped"],
)


# ---- parameters ------------------------------------------------------------------------------


PARAMETERS: Json = {
    "worker": {
        "name": "worker",
        "in": "path",
        "required": True,
        "schema": TEXT,
        "description": "A worker's name, as `api/v1/stats` lists them.",
    },
    "scheduleName": {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": TEXT,
        "description": "A schedule's name, as `api/v1/schedules` lists them.",
    },
    "jobIdInPath": {
        "name": "job_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1},
        "description": "The job's id; it may contain `/`. Use `job?id=` for an id a URL path would rewrite "
                       "(`a/../b`, `a//b`).",
    },
    "jobIdInQuery": {
        "name": "id",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "minLength": 1},
        "description": "The job's id, any text (400 when missing or empty).",
    },
    "searchedId": {
        "name": "id",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_SEARCHED_ID},
        "description": f"The exact id (byte by byte, case-sensitive), any text of at most {MAX_SEARCHED_ID:,} "
                       "characters (400 when missing, empty or longer).",
    },
    "searchFrom": {
        "name": "from",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 0, "default": 0},
        "description": "The position of the first worker to search: a previous answer's `searched.continue` "
                       "(400 past the workers the console knows).",
    },
    "historyHours": {
        "name": "hours",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "enum": list(HISTORY_WINDOWS), "default": HISTORY_WINDOWS[0]},
        "description": "How many hours back, ending now.",
    },
    "tag": {
        "name": "tag",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH},
        "description": "The tag, as jobs carry it: printable text of at most 64 characters (400 otherwise); it may "
                       "contain `/`.",
    },
    "taggedLimit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": API_PAGE_SIZE},
        "description": f"How many ids at most: digits only, 1 to {MAX_LIMIT}.",
    },
    "taggedAfter": {
        "name": "after",
        "in": "query",
        "required": False,
        "schema": TEXT,
        "description": "A previous page's `next`: where this page goes on (400 for anything else).",
    },
    "historyLimit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 200},
        "description": "How many events at most, newest first: digits only, 1 to 1000.",
    },
    "auditLimit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": AUDIT_MAX_LIMIT, "default": AUDIT_DEFAULT_LIMIT},
        "description": f"How many entries, newest first: digits only, 1 to {AUDIT_MAX_LIMIT}.",
    },
    "origin": {
        "name": "Origin",
        "in": "header",
        "required": False,
        "schema": TEXT,
        "description": "When sent (browsers do), it must be the console's own origin or one of "
                       "LOWKIQ_WEB_TRUSTED_ORIGINS, else 403.",
    },
    "secFetchSite": {
        "name": "Sec-Fetch-Site",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "enum": sorted(ALLOWED_FETCH_SITES)},
        "description": "When sent (browsers do), any other value (cross-site, same-site) is refused with 403.",
    },
}


def _any_case(words: Iterable[str]) -> str:
    """A pattern matching exactly these words in any case; JSON Schema's regexes have no flags."""
    alternatives = ("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word) for word in words)
    return f"^(?:{'|'.join(alternatives)})$"


def _bound_text(orders: Iterable[str]) -> str:
    """What ``listing.bound`` accepts for each order."""
    said = []
    for order in orders:
        if order == "id":
            said.append("by `id`, an id (ids compare byte by byte)")
        elif order in TIME_ORDERS:
            said.append(f"by `{order}`, a unix time or a date and time like `2024-05-01 12:00` "
                        "(ISO 8601; the console's local time unless it has an offset)")
        else:
            said.append(f"by `{order}`, a number (`-inf` and `+inf` are open bounds, as in Lowkiq; NaN is refused)")
    return "; ".join(said)


# listing.parse reads an empty value as an absent one.
EMPTY = "An empty value means the default."

# The bounds listing.bound reads for a number or time order, as patterns (JSON Schema's regexes have no flags, so
# "inf" is spelled in any case): a number as float() reads it, the open side's infinity, for a time also an ISO
# date. Surrounding spaces are ignored, and nothing but spaces is no bound.
_DIGITS = "[0-9](?:_?[0-9])*"
NUMBER_TEXT = f"[+-]?(?:{_DIGITS}(?:\\.(?:{_DIGITS})?)?|\\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
_INFINITY = "[iI][nN][fF](?:[iI][nN][iI][tT][yY])?"
OPEN_BOUND = {"min": f"-{_INFINITY}", "max": f"\\+?{_INFINITY}"}
DATE_TEXT = ("[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])(?:[T ](?:[01][0-9]|2[0-3])"
             "(?::[0-5][0-9](?::[0-5][0-9](?:[.,][0-9]+)?)?)?(?:Z|[+-](?:[01][0-9]|2[0-3])(?::?[0-5][0-9])?)?)?")


def bound_pattern(name: str, *, dates: bool) -> str:
    """What ``listing.bound`` accepts as ``name`` ("min" or "max") of a number order, or of a time order."""
    forms = [NUMBER_TEXT, OPEN_BOUND[name], *([DATE_TEXT] if dates else [])]
    return f"^\\s*(?:{'|'.join(forms)})?\\s*$"


def _bound_rules(area: str) -> list[Json]:
    """The bounds of a "matching" body by its order_by (absent: the area's default order), as listing.bound
    reads them: by a number or time order, a JSON number or null or one of ``bound_pattern``'s texts; by id any
    text (the body's own schema)."""
    orders, default, _ = AREA_ORDERS[area]
    rules = []
    for order in orders:
        if order == "id":
            continue
        bounds = {name: {"anyOf": [{"type": ["number", "null"]},
                                   {"type": "string", "pattern": bound_pattern(name, dates=order in TIME_ORDERS)}]}
                  for name in ("min", "max")}
        chosen: Json = {"required": ["order_by"], "properties": {"order_by": {"const": order}}}
        if order == default:
            chosen = {"anyOf": [chosen, {"not": {"required": ["order_by"]}}]}
        rules.append({"if": chosen, "then": {"properties": bounds}})
    return rules


# OpenAPI 3.1 cannot say that two query parameters exclude each other: each description says it.
EXCLUSIVE = "Never with `{other}`: the two together are refused (400)."


def listing_parameters(area: str) -> list[Json]:
    """The query of a listing, as ``listing.parse`` reads it with the area's default order (AREA_ORDERS)."""
    orders, default_order, default_desc = AREA_ORDERS[area]
    direction = (f"When absent, 1 (descending) if the jobs are ordered by {default_order}, else 0."
                 if default_desc else "When absent, 0.")
    bound = (f"Inclusive, of the value the listing is ordered by (surrounding spaces ignored): {_bound_text(orders)}. "
             "The schema gives the number and date forms of the other orders (400 for any other text, or for a date "
             "by a number order); ordered by `id`, any text is a bound, which a parameter's schema cannot say "
             "since it cannot depend on order_by.")
    # Any text when ordered by id: the pattern is what a number or time order takes (see the description).
    bounds = {name: {"type": "string", "pattern": bound_pattern(name, dates=True)} for name in ("min", "max")}
    return [
        ref("parameters", "worker"),
        {"name": "order_by", "in": "query", "required": False,
         "schema": {"type": "string", "enum": list(orders), "default": default_order},
         "description": f"What the jobs are ordered by. {EMPTY}"},
        {"name": "desc", "in": "query", "required": False,
         "schema": {"type": "string", "pattern": _any_case(TRUE_WORDS + FALSE_WORDS),
                    "default": "1" if default_desc else "0"},
         "description": f"Descending order: one of {', '.join(TRUE_WORDS)} or {', '.join(FALSE_WORDS)}, in any case. "
                        f"{direction} {EMPTY}"},
        {"name": "min", "in": "query", "required": False, "schema": bounds["min"],
         "description": f"Lower bound. {bound}"},
        {"name": "max", "in": "query", "required": False, "schema": bounds["max"],
         "description": f"Upper bound. {bound}"},
        {"name": "limit", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": API_PAGE_SIZE},
         "description": f"Jobs per page. {EMPTY}"},
        {"name": "after", "in": "query", "required": False, "schema": _schema("Cursor"),
         "description": f"The page after this cursor (a page's `next`). {EXCLUSIVE.format(other='before')}"},
        {"name": "before", "in": "query", "required": False, "schema": _schema("Cursor"),
         "description": "The page before this cursor (a page's `previous`); paging back to the start "
                        f"answers the full first page. {EXCLUSIVE.format(other='after')}"},
        *({"name": name, "in": "query", "required": False, "schema": NEEDLE,
           "description": f"{schema['description']} A content filter makes the listing a bounded search, shard by "
                          "shard and by id within a shard (order_by and desc do not apply; min and max still "
                          "do), paged with `scan`, never `after` or `before`; the reply's `scan` says how far it "
                          "got. An empty value is refused."}
          for name, schema in CONTENT_FILTER.items()),
        {"name": "scan", "in": "query", "required": False, "schema": TEXT,
         "description": "Where a content search goes on: the `scan.continue` of its previous page. Only with "
                        "error_class, error or payload."},
        {"name": "match_case", "in": "query", "required": False,
         "schema": {"type": "string", "pattern": _any_case(TRUE_WORDS + FALSE_WORDS), "default": "0"},
         "description": f"Whether error_class, error and payload compare letters as given: one of "
                        f"{', '.join(TRUE_WORDS)} or {', '.join(FALSE_WORDS)}, in any case. When absent, 0: case is "
                        "ignored (ASCII letters: 'timeout' finds 'TimeoutError: Timeout after 30 s')."},
        {"name": "tag", "in": "query", "required": False,
         "schema": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH},
         "description": "Only the jobs whose id carries this tag (docs/tags.md), read from the tag index, shard by "
                        "shard and by id in each (order_by and desc do not apply), paged with `tag_after`; the "
                        "reply's `tagged` says where it goes on. It stands alone: with min, max, after, before or "
                        "a content filter it is refused (400)."},
        {"name": "tag_after", "in": "query", "required": False, "schema": TEXT,
         "description": "Where a tag listing goes on: the `tagged.continue` of its previous page. Only with tag."},
    ]


# ---- responses -------------------------------------------------------------------------------


ERROR_STATUSES: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "Bad input: a query parameter or body the caller must fix, named in the message."),
    401: ("Unauthorized", "LOWKIQ_WEB_PASSWORD is set and the request has no or wrong basic credentials."),
    403: ("Forbidden", "Refused: a cross-site or cross-origin action, an action in read-only mode, or a standalone "
                       "console without a password on a public address."),
    404: ("NotFound", "Unknown worker (or a broken registry entry, with its problem), no such job, or a "
                      "confirmation token never issued."),
    405: ("MethodNotAllowed", "The path does not take this method."),
    413: ("PayloadTooLarge", "The body is larger than LOWKIQ_WEB_MAX_CONTENT_LENGTH (or the host app's limit)."),
    409: ("Conflict", "The confirmation token was already used, has expired (10 minutes after its count), or "
                      "counted another action or filter (its reason says which): ask for a new count."),
    415: ("UnsupportedMediaType", "An action sent without Content-Type: application/json."),
    500: ("Misconfigured", "A console setting has a value it does not accept."),
    503: ("Unavailable", "Redis did not answer within LOWKIQ_WEB_REDIS_TIMEOUT, or refused the request."),
}


def _json(schema: Json) -> Json:
    return {"application/json": {"schema": schema}}


ERROR_RESPONSES: Json = {
    name: {"description": description, "content": _json(_schema("Error"))}
    for name, description in ERROR_STATUSES.values()
}
ERROR_RESPONSES["Unauthorized"]["headers"] = {
    "WWW-Authenticate": {"schema": TEXT, "description": 'Basic realm="lowkiq", charset="UTF-8"'}
}

# What any request can meet: the password, the exposure check, a bad setting, Redis.
ALWAYS = (401, 403, 500, 503)


def _responses(schema: str, description: str, *errors: int) -> Json:
    out: Json = {"200": {"description": description, "content": _json(_schema(schema))}}
    for status in sorted({*errors, *ALWAYS}):
        out[str(status)] = ref("responses", ERROR_STATUSES[status][0])
    return out


# ---- paths -----------------------------------------------------------------------------------


def _get(operation_id: str, summary: str, schema: str, answer: str, *errors: int,
         parameters: list[Json] | None = None, description: str = "") -> Json:
    op: Json = {"operationId": operation_id, "summary": summary}
    if description:
        op["description"] = description
    if parameters:
        op["parameters"] = parameters
    op["responses"] = _responses(schema, answer, *errors)
    return {"get": op}


ACTION_SUMMARIES = {
    "morgue/requeue": "Requeue the given dead jobs",
    "morgue/delete": "Delete the given dead jobs",
    "morgue/requeue_all": "Requeue every dead job",
    "morgue/delete_all": "Delete every dead job",
    "enqueued/delete": "Delete the given queued jobs",
    "perform_all_now": "Make every job scheduled in the future due now",
    "kill_failed": "Move every job that has failed to the morgue",
    "delete_failed": "Delete every job that has failed",
}


def action_path(op: Operation) -> str:
    return f"{API}/workers/{{worker}}/{op.path}"


def _action(op: Operation) -> Json:
    what = inspect.getdoc(getattr(Actions, op.method)) or ""
    if op.takes_ids:
        body = {"required": True, "content": _json(_schema("Ids")), "description": "The ids to act on."}
    else:
        body = {"required": False, "content": _json(_schema("NoParameters")),
                "description": "None at all (no Content-Type either, as `curl -X POST` sends), or an empty object as "
                               "application/json; a body of any other type is refused (415)."}
    return {
        "post": {
            "operationId": f"api_{op.endpoint}",
            "summary": ACTION_SUMMARIES.get(op.path, op.path),
            "description": " ".join(part for part in (what, "Recorded in the audit log.") if part),
            "parameters": [ref("parameters", "worker"), ref("parameters", "origin"), ref("parameters", "secFetchSite")],
            "requestBody": body,
            "responses": _responses("ActionResult", "How many jobs the action touched.", 400, 404, 413, 415),
        }
    }


def _retry_now_action() -> Json:
    what = inspect.getdoc(getattr(Actions, RETRY_NOW.method)) or ""
    return {
        "post": {
            "operationId": "api_retry_now",
            "summary": "Make one queued job due now (the job page's Retry now)",
            "description": f"{what} For one id: a job scheduled later (a retry, or a perform_in) becomes due now; "
                           "count is 0 when it already was (or it left the queue meanwhile). An id not in the "
                           f"queue is a 404 that touches nothing. Recorded in the audit log as {RETRY_NOW.path}.",
            "parameters": [ref("parameters", "worker"), ref("parameters", "origin"), ref("parameters", "secFetchSite")],
            "requestBody": {"required": True, "content": _json(_schema("RetryNowRequest")),
                            "description": "The id of the queued job."},
            "responses": _responses("ActionResult", "How many jobs became due now: 1, or 0.", 400, 404, 413, 415),
        }
    }


def _stop_action() -> Json:
    responses = _responses("StopResult", "", 400, 404, 413, 415)
    del responses["200"]
    responses["202"] = {"description": "Asked: the server performing the job kills its child process (and its "
                                       "process group) within about a second; the batch fails with PerformStopped.",
                        "content": _json(_schema("StopResult"))}
    responses["409"] = {"description": "The worker's performs run in threads (isolation \"thread\"), which cannot "
                                       "be stopped safely; or no live server holds the job's shard (its batch goes "
                                       "back to the queue when another server takes it over).",
                        "content": _json(_schema("Error"))}
    return {
        "post": {
            "operationId": "api_busy_stop",
            "summary": "Stop a busy job's perform (process isolation)",
            "description": "For a worker with isolation \"process\": the request is written beside the shard's "
                           "lease, bound to the batch in processing now; the server performing it kills the "
                           "batch's child process and everything it started, and fails the batch with "
                           "PerformStopped (the retry rules apply). An id that is not busy is a 404. Recorded in "
                           "the audit log as busy/stop; a refused stop records nothing.",
            "parameters": [ref("parameters", "worker"), ref("parameters", "origin"), ref("parameters", "secFetchSite")],
            "requestBody": {"required": True, "content": _json(_schema("StopRequest")),
                            "description": "The id of the busy job."},
            "responses": dict(sorted(responses.items())),
        }
    }


def _pause_action(verb: str) -> Json:
    summary, description = {
        "pause": ("Pause the worker's queue", "Servers stop taking its jobs within a heartbeat (a second by "
                  "default), after the batch each is performing; enqueueing goes on. The pause is kept in Redis: "
                  "it survives restarts of servers and consoles."),
        "resume": ("Resume the worker's queue", "Servers take its jobs again within a heartbeat."),
    }[verb]
    return {
        "post": {
            "operationId": f"api_{verb}",
            "summary": summary,
            "description": f"{description} Recorded in the audit log.",
            "parameters": [ref("parameters", "worker"), ref("parameters", "origin"), ref("parameters", "secFetchSite")],
            "requestBody": {"required": False, "content": _json(_schema("NoParameters")),
                            "description": "None at all (no Content-Type either, as `curl -X POST` sends), "
                                           "or an empty object as application/json; a body of any other type "
                                           "is refused (415)."},
            "responses": _responses("PauseResult", "The queue's state now.", 400, 404, 413, 415),
        }
    }


def paths() -> Json:
    worker = f"{API}/workers/{{worker}}"
    out: Json = {
        f"{API}/stats": _get("api_stats", "Queue lengths, dead jobs and lag, in total and by worker", "Stats",
                             "Every worker's numbers."),
        f"{API}/dashboard": _get("api_dashboard", "Every worker's counters, the totals and Redis's", "Dashboard",
                                 "The dashboard's numbers."),
        # The listings' 400 also stands for rules across parameters that OpenAPI cannot state: tag alone (not
        # with min, max, after, before or a content filter), after or before (not both), scan only with a content
        # filter, tag_after only with tag; each parameter's description says which.
        f"{worker}/enqueued": _get("api_enqueued", "A page of the queued jobs", "JobPage", "The page.", 400, 404,
                                   parameters=listing_parameters("enqueued")),
        f"{worker}/morgue": _get("api_morgue", "A page of the dead jobs", "DeadJobPage", "The page.", 400, 404,
                                 parameters=listing_parameters("morgue")),
        f"{worker}/busy": _get("api_busy", "The jobs in processing", "BusyJobs", "The jobs.", 404,
                               parameters=[ref("parameters", "worker")]),
        f"{worker}/hot": _get("api_hot", "The ids with the most versions, retries and perform time over the last "
                              "hour, and each shard's lag", "HotIds", "The hot ids.", 404,
                              parameters=[ref("parameters", "worker")],
                              description="Counted from each shard's history stream, walked back an hour at most, "
                                          "within a budget of entries per request that the answer states "
                                          "(`budget`, `whole_window`); each shard's oldest due id by perform_in."),
        f"{worker}/job": _get("api_job_by_query", "Where a job is, by an id in the query", "JobLookup",
                              "Where the job is.", 400, 404,
                              parameters=[ref("parameters", "worker"), ref("parameters", "jobIdInQuery")],
                              description="As `jobs/{job_id}`, for any id, even one a URL path would rewrite."),
        f"{worker}/job/history": _get("api_job_history", "An id's history: what happened to it, when, where, by whom",
                                      "IdHistory", "Newest first; an empty list when the history does not hold it.",
                                      400, 404,
                                      parameters=[ref("parameters", "worker"), ref("parameters", "jobIdInQuery"),
                                                  ref("parameters", "historyLimit")],
                                      description="Read from the id's shard's history (docs/history.md), a bounded "
                                                  "walk of at most history_length entries."),
        f"{worker}/jobs/{{job_id}}": _get("api_job", "Where a job is: queued, in processing, dead", "JobLookup",
                                          "Where the job is.", 404,
                                          parameters=[ref("parameters", "worker"), ref("parameters", "jobIdInPath")]),
        f"{worker}/tagged/{{tag}}": _get("api_tagged", "The ids that carry a tag, a page at a time", "TaggedPage",
                                         "The page.", 400, 404,
                                         parameters=[ref("parameters", "worker"), ref("parameters", "tag"),
                                                     ref("parameters", "taggedLimit"),
                                                     ref("parameters", "taggedAfter")],
                                         description="Read from each shard's tag index (docs/tags.md): a page costs "
                                                     "the ids it reads, whatever the queue holds. Queued, busy "
                                                     "and dead ids alike; an id leaves with its last copy."),
        f"{API}/search": _get("api_search", "Where an id is in every worker: queued, in processing, dead",
                              "SearchResult", "The workers that hold the id; an empty list when none does.", 400,
                              parameters=[ref("parameters", "searchedId"), ref("parameters", "searchFrom")],
                              description="The console's search: each worker is looked up as `jobs/{job_id}` "
                                          f"looks up one (three reads of the id's shard), {SEARCH_WORKERS} workers "
                                          "at most per request; `searched` says which, and where the next "
                                          "request goes on."),
        f"{API}/audit": _get("api_audit", "The newest operator actions", "AuditLog", "Newest first.", 400,
                             parameters=[ref("parameters", "auditLimit")]),
        f"{API}/history": _get("api_history", "Jobs processed and failed per minute, and the lag, over the last hours",
                               "History", "Per minute, oldest first.", 400,
                               parameters=[ref("parameters", "historyHours")],
                               description="From the per-minute totals servers (and open dashboards) record in "
                                           "Redis, kept two days. A minute nobody recorded is absent; the rate after "
                                           "a gap is the average over it."),
        f"{API}/servers": _get("api_servers", "The live server processes and the shards each holds", "Servers",
                               "The live servers."),
        f"{API}/openapi.json": _get("api_openapi", "This document", "OpenAPIDocument", "The OpenAPI 3.1 document."),
    }
    for op in OPERATIONS:
        out[action_path(op)] = _action(op)
    out[f"{worker}/enqueued/retry_now"] = _retry_now_action()
    out[f"{worker}/busy/stop"] = _stop_action()
    for verb in ("pause", "resume"):
        out[f"{worker}/{verb}"] = _pause_action(verb)
    for area in ("enqueued", "morgue"):
        out[f"{worker}/{area}/matching"] = _matching_action(area)
    out[f"{API}/schedules"] = _get("api_schedules", "Every recurring schedule: rule, next and last tick, paused",
                                   "Schedules", "The schedules, from the app or the registry servers keep.")
    for verb in ("pause", "resume", "run"):
        out[f"{API}/schedules/{{name}}/{verb}"] = _schedule_action(verb)
    out.update(_groups_stats_paths(worker))
    return out


def _groups_stats_paths(worker: str) -> Json:
    """A worker's groups, pausing one, and its day stats (their tables: openapi_groups_stats)."""
    out: Json = {}
    for suffix, operation_id, summary, schema, answer, errors, names in openapi_groups_stats.GETS:
        out[f"{worker}/{suffix}"] = _get(operation_id, summary, schema, answer, *errors,
                                         parameters=[ref("parameters", name) for name in names])
    for verb, summary, description in openapi_groups_stats.GROUP_ACTIONS:
        out[f"{worker}/groups/{{group}}/{verb}"] = {"post": {
            "operationId": f"api_group_{verb}",
            "summary": summary,
            "description": f"{description} Recorded in the audit log as group/{verb}.",
            "parameters": [ref("parameters", "worker"), ref("parameters", "group"), ref("parameters", "origin"),
                           ref("parameters", "secFetchSite")],
            "requestBody": {"required": False, "content": _json(_schema("NoParameters")),
                            "description": "None at all, or an empty object as application/json."},
            "responses": _responses("GroupPauseResult", "The group's state now.", 400, 404, 413, 415),
        }}
    return out


def _schedule_action(verb: str) -> Json:
    summary, description, schema = {
        "pause": ("Pause a schedule", "No tick of it is enqueued from now on (the pause is checked in the same "
                  "step as each enqueue); ticks due while paused are missed ticks, for its catch_up.",
                  "SchedulePauseResult"),
        "resume": ("Resume a schedule", "Its ticks are enqueued again, and its catch_up decides about those "
                   "missed while it was paused.", "SchedulePauseResult"),
        "run": ("Run a schedule now", "Enqueue its job at once, also while paused: {\"scheduled_at\": <Redis now>} "
                "plus its payload. Its next tick comes as planned.", "ScheduleRunResult"),
    }[verb]
    return {
        "post": {
            "operationId": f"api_schedule_{verb}",
            "summary": summary,
            "description": f"{description} Recorded in the audit log.",
            "parameters": [ref("parameters", "scheduleName"), ref("parameters", "origin"),
                           ref("parameters", "secFetchSite")],
            "requestBody": {"required": False, "content": _json(_schema("NoParameters")),
                            "description": "None at all (no Content-Type either, as `curl -X POST` sends), "
                                           "or an empty object as application/json; a body of any other type "
                                           "is refused (415)."},
            "responses": _responses(schema, "What the action did.", 400, 404, 413, 415),
        }
    }


def _matching_action(area: str) -> Json:
    jobs = "dead" if area == "morgue" else "queued"
    return {
        "post": {
            "operationId": f"api_{area}_matching",
            "summary": f"Act on the {jobs} jobs a filter matches: count first, then confirm",
            "description": f"With dry_run: count the {jobs} jobs within min..max of order_by (all of them without "
                           "bounds) whose content matches error_class, error and payload when given (a search of "
                           "every shard in short steps), or whose id carries `tag` (from the tag index), and answer "
                           "a token. With confirm: act on exactly the "
                           "jobs that count named, of them on those that still match (jobs that came to match "
                           "later are never touched). A token is used once and expires after 10 minutes; a "
                           "reused, expired or mismatched (409) or unknown (404) token touches nothing. "
                           "Recorded in the audit log.",
            "parameters": [ref("parameters", "worker"), ref("parameters", "origin"), ref("parameters", "secFetchSite")],
            "requestBody": {"required": True, "content": _json({"allOf": [_schema("MatchingRequest"), {"properties": {
                "action": {"enum": list(MATCHING_VERBS[area])},
                "order_by": {"enum": list(MORGUE_ORDERS if area == "morgue" else ENQUEUED_ORDERS)},
            }}, *_bound_rules(area)]})},
            "responses": _responses("MatchingAnswer", "The count and its token, or what the action did.",
                                    400, 404, 409, 413, 415),
        }
    }
