"""The OpenAPI pieces of a worker's groups (listing, pausing one) and its day stats: ``openapi`` adds them to its
document. Kept apart so that the main document's tables stay one screen per concern."""

from __future__ import annotations

from typing import Any

from ..console.day_stats import BUCKETS, KEEP_DAYS

Json = dict[str, Any]


def schemas() -> Json:
    from .openapi import COUNT, SECONDS, TEXT, _nullable, _object, _schema

    return {
        "GroupRow": _object({
            "group": {**TEXT, "description": "The group's name."},
            "queued": {**COUNT, "description": "Its ids queued, in every shard."},
            "busy": {**COUNT, "description": "Its ids in processing now."},
            "oldest_wait": {**SECONDS, "description": "How long its oldest queued id has been due; 0 when none is."},
            "paused": {**_nullable(_schema("Pause")), "description": "Who paused the group and when; null while it "
                                                                      "flows."},
        }),
        "Groups": _object({
            "worker": TEXT,
            "groups": {"type": "array", "items": _schema("GroupRow"),
                       "description": "Most queued first; paused groups always listed. At most 200 groups per "
                                      "shard are read, the biggest."},
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
                "description": "Jobs per fixed bucket: each up to `le` seconds (above the previous bound), the last "
                               "(`le` null) above " + f"{BUCKETS[-1]:g} s. Bounds: " + ", ".join(f"{b:g}" for b in BUCKETS)
                               + " s.",
                "items": _object({"le": _nullable({"type": "number"}), "count": COUNT}),
            },
        }),
        "DayStats": _object({
            "worker": TEXT,
            "day": {**TEXT, "description": "The UTC day, YYYY-MM-DD."},
            "wait": {**_schema("DayMeasure"), "description": "From when a job was due to when its perform started."},
            "run": {**_schema("DayMeasure"), "description": "From a perform's start to its end; a batch's jobs each "
                                                             "count the batch's time."},
        }, f"A worker's jobs performed that day (by when the perform ended), kept {KEEP_DAYS} days."),
    }


def parameters() -> Json:
    return {
        "group": {"name": "group", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
                  "description": "A group's name, as jobs carry it (`group`); it may contain `/`."},
        "day": {"name": "day", "in": "query", "required": False,
                "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "description": "The UTC day, YYYY-MM-DD; today (the console's clock) when absent. Any other text, "
                               "or a date that does not exist, is a 400."},
    }


def paths(worker: str) -> Json:
    from .openapi import _get, _json, _responses, _schema, ref

    out: Json = {
        f"{worker}/groups": _get("api_groups", "The worker's groups: queued, busy, oldest wait, paused", "Groups",
                                 "The groups.", 404, parameters=[ref("parameters", "worker")]),
        f"{worker}/stats": _get("api_stats_day", "The worker's wait and run times of one UTC day", "DayStats",
                                "Counts, means, deviations and histograms; zeros for a day without jobs.", 400, 404,
                                parameters=[ref("parameters", "worker"), ref("parameters", "day")]),
    }
    for verb, summary, description in (
            ("pause", "Pause one group of the worker", "Its queued ids stay queued, in order, while every other group "
             "flows; busy ones finish. Servers pass it over from their next take. Kept in Redis, in every shard."),
            ("resume", "Resume a paused group", "Its ids run again, in their order.")):
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
