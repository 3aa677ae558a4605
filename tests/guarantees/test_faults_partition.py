"""A server process cut off from Redis past its lease, then back, with real `lowkiq -r` processes.

A TCP proxy owned by the test stands between one process and Redis. Cutting it (every connection reset, or
every byte dropped so that calls time out) must cost what a pause (SIGSTOP) costs: the other process takes
the shards over and runs the cut one's in-flight batch again; the cut one is fenced when it comes back, runs
nothing more under its old leases, and gets its share back by handover, not by takeover.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from execution_checks import Producer, check
from fault_support import drain, holdings, in_processing, member_of, server, settled, stop_all
from server_support import records
from timing_support import wait_until

from lowkiq.store.codec import shard_of

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]

LEASE_TTL = 2.0  # test_leases_faults.FAST
# A shard left by a process that stopped renewing is served again within a lease, a beat, a settle and a take.
TAKEOVER_BOUND = LEASE_TTL + 0.3 + 0.3 + 1.0
HOT_IDS = 30  # hot0 .. hot29: every one of the 12 shards has some


class Proxy:
    """127.0.0.1:<port> forwarding to Redis; ``cut()`` resets or silently drops every connection until ``heal()``."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.mode: str | None = None  # None: forwarding; "reset" or "drop": cut
        self.sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut(self, mode: str) -> None:
        self.mode = mode
        if mode == "reset":
            with self.lock:
                for s in self.sockets:
                    self._close(s)

    def heal(self) -> None:
        self.mode = None

    def close(self) -> None:
        self.listener.close()
        self.cut("reset")

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.mode == "reset":
                self._close(client)
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                self._close(client)
                continue
            with self.lock:
                self.sockets |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if self.mode is None:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src)
            self._close(dst)

    @staticmethod
    def _close(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()


@pytest.fixture
def proxy(redis_server):
    p = Proxy(redis_server.port)
    yield p
    p.close()


def stale_performs(tmp, shards: int) -> list[dict[str, Any]]:
    """Performs that started under a lower fencing token than a perform of the same shard that started before:
    performs of a process that went on under a lease it had lost."""
    by_shard: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rec in records(tmp, "perform"):
        by_shard[shard_of(next(iter(rec["batch"])), shards)].append(rec)
    stale = []
    for recs in by_shard.values():
        highest: list[int] = []
        for rec in sorted(recs, key=lambda rec: rec["start"]):
            if rec["token"] < highest:
                stale.append(rec)
            highest = max(highest, rec["token"])
    return stale


def longest_gaps(tmp, shards: int, since: float, until: float) -> dict[int, float]:
    """Per shard, the longest time between two perform starts (or since/until) on it, by any process."""
    starts: dict[int, list[float]] = defaultdict(list)
    for rec in records(tmp, "perform"):
        if since <= rec["start"] <= until:
            starts[shard_of(next(iter(rec["batch"])), shards)].append(rec["start"])
    return {shard: max(b - a for a, b in zip([since, *sorted(starts[shard])], [*sorted(starts[shard]), until]))
            for shard in range(shards)}


@pytest.mark.parametrize("mode", ["reset", "drop", "pause"])
def test_a_process_cut_off_from_redis_past_its_lease_is_fenced_and_comes_back_by_handover(
        versions, r, redis_url, tmp_path, proxy, mode):
    shards = versions.shards_count
    # Calls on a connection that drops everything time out within a second, not the default five.
    cut = server(tmp_path, proxy.url, "cut", APP_PERFORM_SECONDS="0.05", LOWKIQ_POOL_TIMEOUT="1")
    other = server(tmp_path, redis_url, "other", APP_PERFORM_SECONDS="0.05")
    processes = [cut, other]
    producer = Producer(versions, ids=HOT_IDS, every=0.005)
    if mode == "pause":
        interrupt, resume = (lambda: cut.signal(signal.SIGSTOP)), (lambda: cut.signal(signal.SIGCONT))
    else:
        interrupt, resume = (lambda: proxy.cut(mode)), proxy.heal
    try:
        assert {shard_of(f"hot{i}", shards) for i in range(HOT_IDS)} == set(range(shards))
        wait_until(lambda: settled(r, {cut.pid, other.pid}, shards) and all(holdings(r).values()), timeout=15)
        producer.start()
        loaded_at = time.time() + 0.5
        time.sleep(1.5)
        owner = member_of(r, cut.pid)
        cut_shards = holdings(r)[cut.pid]
        interrupt()
        cut_at = time.time()
        in_flight = in_processing(r, versions, owner)

        # The other process serves the cut one's shards again, and runs its in-flight batch again.
        def served_again() -> dict[int, float]:
            first: dict[int, float] = {}
            for rec in records(tmp_path, "perform"):
                if rec["pid"] == other.pid and rec["start"] >= cut_at:
                    first.setdefault(shard_of(next(iter(rec["batch"])), shards), rec["start"])
            return first if cut_shards <= set(first) else {}

        first = wait_until(served_again, timeout=10)
        assert max(first[s] for s in cut_shards) - cut_at < TAKEOVER_BOUND, (first, cut_shards)
        time.sleep(max(0.0, cut_at + 2 * LEASE_TTL - time.time()))
        took_over_while_cut = other.log().count("took over shard")
        assert took_over_while_cut >= (1 if in_flight else 0)
        resume()

        # Back: it learns it lost its leases, rejoins, and gets its share by handover.
        wait_until(lambda: "lost the lease" in cut.log(), timeout=15)
        wait_until(lambda: settled(r, {cut.pid, other.pid}, shards) and all(holdings(r).values()), timeout=20)
        resumed_at = time.time()
        wait_until(lambda: holdings(r)[cut.pid] <= {shard_of(next(iter(rec["batch"])), shards)
                                                    for rec in records(tmp_path, "perform")
                                                    if rec["pid"] == cut.pid and rec["start"] > resumed_at},
                   timeout=15)
        time.sleep(1)
        unloaded_at = time.time()
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        in_flight_ids = {job_id for job_id, _ in in_flight}
        assert (report.lost, report.order) == (set(), set()), report
        assert report.duplicates <= in_flight, (report, in_flight)
        assert report.overlaps <= in_flight_ids, (report, in_flight)
        # Nothing started under a lost lease but, paused between its last check and the perform, the in-flight batch.
        stale = [rec for rec in stale_performs(tmp_path, shards)
                 if not {(job_id, p["v"]) for job_id, ps in rec["batch"].items() for p in ps} <= in_flight]
        assert stale == []
        # Every shard served all along, but for the takeover: no waiting on back-offs once Redis answers again.
        gaps = longest_gaps(tmp_path, shards, loaded_at, unloaded_at)
        assert max(gaps.values()) < TAKEOVER_BOUND + 0.5, gaps
        assert other.log().count("took over shard") == took_over_while_cut
        assert "took over shard" not in cut.log()
    finally:
        producer._stop.set()  # a failed test must not leave its producer writing into the next one
        cut.signal(signal.SIGCONT)
        stop_all(processes)
