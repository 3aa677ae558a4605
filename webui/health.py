"""``/healthz``: the console process answers and reaches Redis, for load balancers' and Kubernetes' probes.

It is open to every caller, without the console's password and whatever the ``Host``: a probe carries
neither, and the answer says nothing but whether Redis answered this process.
"""

from __future__ import annotations

import time

import redis
from flask import Response, jsonify

from .blueprint import bp
from .state import console


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    started = time.monotonic()
    try:
        console().client.ping()
    except (redis.RedisError, OSError) as exc:
        check = {"ok": False, "reason": f"Redis does not answer: {type(exc).__name__}"}
        return jsonify({"status": "unavailable", "checks": {"redis": check}}), 503
    check = {"ok": True, "seconds": round(time.monotonic() - started, 4)}
    return jsonify({"status": "ok", "checks": {"redis": check}}), 200
