"""A server process's health for probes (Kubernetes' liveness and readiness), on ``--metrics-port``.

``/healthz``: the process is alive and Redis answers it (its keeper's last heartbeat got a reply within
``lease_ttl``). ``/readyz``: besides, it is not stopping, holds every shard the assignment gives it (its
share) and is not stalled (its threads waiting for a suspect batch), so a rolling deploy that waits for
readiness moves on only once the new process serves. Each
answers 200 or 503 with a small JSON body saying which check failed; ``/metrics`` is Prometheus's text.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

if TYPE_CHECKING:
    from .keeper import Keeper

log = logging.getLogger("lowkiq.server")

Check = dict[str, Any]


class Health:
    def __init__(self, keeper: Callable[[], Keeper | None], lease_ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keeper = keeper
        self.lease_ttl = lease_ttl
        self.clock = clock

    def live(self) -> tuple[bool, dict[str, Check]]:
        keeper = self.keeper()
        redis = self._redis(keeper)
        return redis["ok"], {"redis": redis}

    def ready(self) -> tuple[bool, dict[str, Check]]:
        keeper = self.keeper()
        redis = self._redis(keeper)
        shards = self._shards(keeper)
        stall = self._stall(keeper)
        return redis["ok"] and shards["ok"] and stall["ok"], {"redis": redis, "shards": shards, "stall": stall}

    @staticmethod
    def _stall(keeper: Keeper | None) -> Check:
        waiting = None if keeper is None or keeper.isolation is None else keeper.isolation.waiting_on()
        if waiting is None:
            return {"ok": True}
        return {"ok": False, "reason": f"its threads wait for a suspect batch of {waiting.get('worker')} "
                                       f"({waiting.get('for_at_most')} s more at most)", "waiting": waiting}

    def _redis(self, keeper: Keeper | None) -> Check:
        answered = None if keeper is None else keeper.answered_at
        if answered is None:
            return {"ok": False, "reason": "no heartbeat has been answered yet"}
        age = self.clock() - answered
        if age > self.lease_ttl:
            return {"ok": False, "reason": f"Redis has not answered for {age:.1f} s", "seconds": round(age, 3)}
        return {"ok": True, "seconds_since_answer": round(age, 3)}

    @staticmethod
    def _shards(keeper: Keeper | None) -> Check:
        if keeper is None or keeper.view is None:
            return {"ok": False, "reason": "starting: the membership is not read yet"}
        if keeper.draining or keeper.stop.is_set():
            return {"ok": False, "reason": "stopping"}
        held = {shard for shard, lease in keeper.holdings.held().items() if lease.lost is None}
        missing = keeper.desired - held
        out: Check = {"ok": not missing, "share": len(keeper.desired), "held": len(held & keeper.desired)}
        if missing:
            out["reason"] = f"holds {out['held']} of the {out['share']} shards of its share"
        return out


def serve(port: int, registry: CollectorRegistry, health: Health, address: str = "") -> ThreadingHTTPServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on ``port`` from a daemon thread (every interface unless
    ``address`` is given)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._send(200, content_type, encoder(registry))
            elif path in ("/healthz", "/readyz"):
                ok, checks = health.live() if path == "/healthz" else health.ready()
                body = json.dumps({"status": "ok" if ok else "unavailable", "checks": checks}).encode()
                self._send(200 if ok else 503, "application/json", body)
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: /metrics, /healthz or /readyz\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address or "0.0.0.0", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lowkiq-metrics", daemon=True).start()
    return server
