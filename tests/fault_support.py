"""What the fault tests share: servers with short leases running the versions app, and how to tell they settled,
drained and took over."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import msgpack
from execution_checks import Producer, check
from server_support import APPS, ServerProcess, queue_empty, records, start_server
from timing_support import wait_until

from lowkiq.store import membership
from lowkiq.store.codec import shard_of

APP = APPS / "versions_app.py"


# Leases shorter than the defaults so that takeovers fit a test; the same relations as the defaults.
FAST = {"LOWKIQ_LEASE_TTL": "2", "LOWKIQ_HEARTBEAT_INTERVAL": "0.3", "LOWKIQ_SETTLE": "0.3",
        "LOWKIQ_SHUTDOWN_TIMEOUT": "10", "LOWKIQ_POLL_INTERVAL": "0.1"}


def server(tmp: Path, url: str, name: str, *args: str, **env: str) -> ServerProcess:
    return start_server(tmp, url, "--threads", "2", *args, app=APP, env={**FAST, **env}, name=name)


def holdings(r) -> dict[int, set[int]]:
    """pid -> shards held, as the live servers' heartbeats say."""
    return {m.pid: set(m.shards.get("Versions", ())) for m in membership.live(r)}


def settled(r, pids: set[int], shards: int) -> bool:
    """Every shard held once, by ``pids``, each serving some: the first server serves them all from its first
    beat, until the others have settled in."""
    held = holdings(r)
    return (set(held) == pids and all(held.values())
            and sorted(s for part in held.values() for s in part) == list(range(shards)))


def drain(r, worker, enqueued, tmp, timeout: float = 30.0) -> None:
    def done() -> bool:
        if not queue_empty(r, worker):
            return False
        performed = {(job_id, p["v"]) for rec in records(tmp, "perform") for job_id, ps in rec["batch"].items()
                     for p in ps}
        return enqueued <= performed

    wait_until(done, timeout=timeout, interval=0.2)


def restored_by_takeover(processes: list[ServerProcess]) -> list[str]:
    return [line for p in processes for line in p.log().splitlines() if "took over shard" in line]


def in_processing(r, worker, owner: str) -> set[tuple[str, int]]:
    """(id, version) of every job in the processing areas of the shards ``owner`` holds."""
    found = set()
    for shard in worker.keys().shards():
        if r.hget(shard.lease_hash, "owner") != owner.encode():
            continue
        for job_id, blob in r.hgetall(shard.processing_hash).items():
            unpacker = msgpack.Unpacker(raw=True)
            unpacker.feed(blob)
            *_, flat = list(unpacker)
            for raw in flat[0::2]:
                payload = __import__("json").loads(raw)
                if isinstance(payload, dict) and "v" in payload:
                    found.add((job_id.decode(), payload["v"]))
    return found


def member_of(r, pid: int) -> str:
    return next(m.id for m in membership.live(r) if m.pid == pid)


def stop_all(processes: list[ServerProcess]) -> None:
    for p in processes:
        p.kill()


def kill_one_of_three(r, worker, processes: list[ServerProcess], tmp: Path, settle: float = 15.0) -> None:
    """kill -9 of the first of ``processes`` (three servers) under load: nothing lost, no overlap, every id in
    order, only its in-flight batches run twice, and every shard it held served again within 10 s."""
    shards = worker.shards_count
    wait_until(lambda: settled(r, {p.pid for p in processes}, shards), timeout=settle)
    producer = Producer(worker, every=0.005).start()
    time.sleep(2)
    victim = processes[0]
    owner = member_of(r, victim.pid)
    victim_shards = holdings(r)[victim.pid]
    victim.process.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = time.time()
    in_flight = in_processing(r, worker, owner)
    time.sleep(3)
    enqueued = producer.stop()
    drain(r, worker, enqueued, tmp)
    report = check(tmp, enqueued)
    assert (report.lost, report.overlaps, report.order) == (set(), set(), set()), report
    assert report.duplicates <= in_flight, (report, in_flight)
    survivors = {p.pid for p in processes[1:]}
    first_after: dict[int, float] = {}
    for rec in records(tmp, "perform"):
        if rec["pid"] in survivors and rec["start"] >= killed_at:
            for job_id in rec["batch"]:
                shard = shard_of(job_id, shards)
                if shard in victim_shards:
                    first_after.setdefault(shard, rec["start"])
    assert first_after, "none of the victim's shards had work after the kill"
    assert max(first_after.values()) - killed_at < 10, first_after
    if in_flight:
        assert restored_by_takeover(processes[1:])  # its batches came back with the takeover
