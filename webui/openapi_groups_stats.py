"""The OpenAPI pieces of a worker's groups (listing, pausing one) and its day stats, as data: ``openapi`` builds
their paths with its own helpers and adds the schemas and parameters to its document. Kept apart so that the main
document's tables stay one screen per concern."""

from __future__ import annotations

from typing import Any

from ..console.day_stats import BUCKETS, KEEP_DAYS

Json = dict[str, Any]

COUNT: Json = {"type": "integer", "minimum": 0}
SECONDS: Json = {"type": "number", "minimum": 0}
TEXT: Json = {"type": "string"}


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: Json) -> Json:
    return {"oneOf": [schema, {"type": "null"}]}


def _object(properties: Json, description: str = "") -> Json:
    out: Json = {"type": "object", "required": list(properties), "properties": properties,
                 "additionalProperties": False}
    if description:
        out["description"] = description
    return out


SCHEMAS: Json = {
    "GroupRow": _object({
        "group": {**TEXT, "description": "The group's name."},
        "queued": {**COUNT, "description": "Its ids queued, in every shard."},
        "busy": {**COUNT, "description": "Its ids in processing now."},
        "oldest_wait": {**SECONDS, "description": "How long its oldest queued id has been due; 0 when none is."},
        "paused": {**_nullable(_ref("Pause")), "description": "Who paused the group and when; null while it flows."},
    }),
    "Groups": _object({
        "worker": TEXT,
        "groups": {"type": "array", "items": _ref("GroupRow"),
                   "description": "Most queued first; paused groups always listed. At most 200 groups per shard "
                                  "are read, the biggest."},
    }),
    "GroupPauseResult": _object({
        "group": TEXT,
        "paused": {"type": "boolean", "description": "Whether the group is paused now."},
        "changed": {"type": "boolean", "description": "False when it already was so."},
    }),
    "DayMeasure": _object({
        "count": {**COUNT, "description": "Jobs counted."},
        "mean": {**SECONDS, "description": "Seconds; 0 without jobs."},
        "stddev": {**SECONDS, "description": "The population standard deviation, seconds."},
        "histogram": {
            "type": "array", "minItems": len(BUCKETS) + 1, "maxItems": len(BUCKETS) + 1,
            "description": f"Jobs per fixed bucket: each up to `le` seconds (above the previous bound), the last "
                           f"(`le` null) above {BUCKETS[-1]:g} s. Bounds: {', '.join(f'{b:g}' for b in BUCKETS)} s.",
            "items": _object({"le": _nullable({"type": "number"}), "count": COUNT}),
        },
    }),
    "DayStats": _object({
        "worker": TEXT,
        "day": {**TEXT, "description": "The UTC day, YYYY-MM-DD."},
        "wait": {**_ref("DayMeasure"), "description": "From when a job was due to when its perform started."},
        "run": {**_ref("DayMeasure"), "description": "From a perform's start to its end; a batch's jobs each count "
                                                     "the batch's time."},
    }, f"A worker's jobs performed that day (by when the perform ended), kept {KEEP_DAYS} days."),
}

PARAMETERS: Json = {
    "group": {"name": "group", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
              "description": "A group's name, as jobs carry it (`group`); it may contain `/`."},
    "day": {"name": "day", "in": "query", "required": False,
            "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "description": "The UTC day, YYYY-MM-DD; today (the console's clock) when absent. Any other text, or a "
                           "date that does not exist, is a 400."},
}

# (path under the worker, operationId, summary, schema, what the 200 is, error statuses, parameters)
GETS: tuple[tuple[str, str, str, str, str, tuple[int, ...], tuple[str, ...]], ...] = (
    ("groups", "api_groups", "The worker's groups: queued, busy, oldest wait, paused", "Groups", "The groups.",
     (404,), ("worker",)),
    ("stats", "api_stats_day", "The worker's wait and run times of one UTC day", "DayStats",
     "Counts, means, deviations and histograms; zeros for a day without jobs.", (400, 404), ("worker", "day")),
)

# (verb, summary, description) of POST groups/{group}/<verb>
GROUP_ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("pause", "Pause one group of the worker", "Its queued ids stay queued, in order, while every other group "
     "flows; busy ones finish. Servers pass it over from their next take. Kept in Redis, in every shard."),
    ("resume", "Resume a paused group", "Its ids run again, in their order."),
)
