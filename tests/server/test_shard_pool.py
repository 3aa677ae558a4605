"""A shard waits only on its own perform: the threads of a process are a pool over the shards it holds, with
real ``lowkiq -r`` processes, a real redis-server and an execution log. A runaway perform (it catches
``TimeLimitExceeded`` and runs on) holds its own shard only; a suspect batch after a restart pauses the other
threads for its time limit at most; surplus shards are handed over whatever the threads are doing."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from server_support import APPS, FAST_LEASES, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store import membership
from lowkiq.webui import create_app

pytestmark = pytest.mark.slow
APP = APPS / "runaway_app.py"


class Runaway(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


class Slow(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


class Orders(lowkiq.Worker):
    shards_count = 10

    def perform(self, payloads_by_id):
        pass


def held(r) -> dict[int, int]:
    """pid -> how many shards (of every worker) it holds, as the live servers' heartbeats say."""
    return {m.pid: sum(len(indexes) for indexes in m.shards.values()) for m in membership.live(r)}


def settled(r, pids: set[int]) -> bool:
    """The 12 shards held once, by ``pids``, each holding some."""
    counts = held(r)
    return set(counts) == pids and all(counts.values()) and sum(counts.values()) == 12


def orders_over_every_shard(count: int, prefix: str) -> list[dict]:
    now = time.time()
    return [{"id": f"{prefix}{i}", "payload": {"at": now}} for i in range(count)]


def performed_orders(tmp_path) -> dict[str, dict]:
    return {rec["id"]: rec for rec in records(tmp_path, "order")}


def test_a_runaway_perform_holds_its_own_shard_only(tmp_path, redis_url, r):  # r: a flushed Redis
    server = start_server(tmp_path, redis_url, "-t", "2", app=APP, env=FAST_LEASES)
    try:
        lowkiq.configure(redis_url=redis_url, workers=[Runaway, Slow, Orders])
        Runaway.perform_async([{"id": "report", "payload": 1}])
        wait_until(lambda: records(tmp_path, "runaway"), 15)
        jobs = orders_over_every_shard(200, "o")
        assert len({lowkiq.current().queue(Orders).shard_of(job["id"]) for job in jobs}) == 10
        sent = time.monotonic()
        Orders.perform_async(jobs)
        wait_until(lambda: len(performed_orders(tmp_path)) == 200, 15)
        assert time.monotonic() - sent < 15
        # the runaway is still running on its own thread meanwhile
        assert server.process.poll() is None and len(records(tmp_path, "runaway")) == 1
    finally:
        server.kill()
        lowkiq.runtime._current = None


def test_a_restart_beside_a_runaway_stalls_no_other_worker_and_shares_stay_fair(tmp_path, redis_url, r):
    env = {**FAST_LEASES, "LOWKIQ_SHUTDOWN_TIMEOUT": "2", "APP_RUNAWAY_SECONDS": "90"}
    first = [start_server(tmp_path, redis_url, "-t", "2", app=APP, env=env, name=f"s{i}") for i in range(2)]
    servers = list(first)
    stop = threading.Event()
    sent: list[str] = []

    def produce() -> None:
        n = 0
        while not stop.is_set():
            batch = orders_over_every_shard(5, f"p{n}-")
            Orders.perform_async(batch)
            sent.extend(job["id"] for job in batch)
            n += 1
            time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        lowkiq.configure(redis_url=redis_url, workers=[Runaway, Slow, Orders])
        wait_until(lambda: settled(r, {s.pid for s in servers}), 20)
        Runaway.perform_async([{"id": "report", "payload": 1}])
        wait_until(lambda: records(tmp_path, "runaway"), 15)
        runaway_pid = records(tmp_path, "runaway")[0]["pid"]
        producer.start()
        time.sleep(2)
        # The runaway's server is restarted: it leaves its perform behind after its shutdown timeout, and the
        # batch comes back as a suspect on a server that takes the shard over.
        victim = next(s for s in servers if s.pid == runaway_pid)
        victim.stop()
        servers.remove(victim)
        servers.append(start_server(tmp_path, redis_url, "-t", "2", app=APP, env=env, name="s-again"))
        wait_until(lambda: settled(r, {s.pid for s in servers}), 20)
        wait_until(lambda: len(records(tmp_path, "runaway")) >= 2, 20)  # the suspect runs again, alone
        time.sleep(15)
        # No server holds more than its share + 1, whatever its threads are doing.
        counts = held(r)
        assert max(counts.get(s.pid, 0) for s in servers) <= 6 + 1, counts  # a share is 6 of the 12
        stop.set()
        producer.join(5)
        wait_until(lambda: set(sent) <= set(performed_orders(tmp_path)), 45)
        waits = [rec["performed"] - rec["enqueued"] for rec in performed_orders(tmp_path).values()]
        assert max(waits) < 45, max(waits)
    finally:
        stop.set()
        for server in servers:
            server.kill()
        lowkiq.runtime._current = None


def test_the_servers_api_shows_a_server_waiting_for_a_suspect_batch_and_who_performs_it(tmp_path, redis_url, r):
    env = {**FAST_LEASES, "LOWKIQ_SUSPECT_WAIT": "6", "APP_SLOW_SECONDS": "4"}
    first = start_server(tmp_path, redis_url, "-t", "2", app=APP, env=env, name="first")
    servers = [first]
    try:
        lowkiq.configure(redis_url=redis_url, workers=[Runaway, Slow, Orders])
        wait_until(lambda: held(r).get(first.pid), 15)  # it registered its workers, and serves
        client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url}).test_client()
        Slow.perform_async([{"id": "suspect-7", "payload": 1}])
        wait_until(lambda: records(tmp_path, "slow"), 10)
        # who performs it: the server's one name and the thread, in the busy API
        reply = client.get("/api/v1/workers/Slow/busy")
        assert reply.status_code == 200, reply.get_json()
        (busy,) = reply.get_json()["jobs"]
        assert busy["id"] == "suspect-7" and busy["server"] == f"{socket.gethostname()}:{first.pid}"
        assert busy["thread"].startswith("lowkiq-")
        first.kill()  # kill -9 mid-perform: the batch comes back as a suspect where the shard is taken over
        second = start_server(tmp_path, redis_url, "-t", "2", app=APP, env=env, name="second")
        servers.append(second)

        def waiting() -> dict | None:
            for server in client.get("/api/v1/servers").get_json()["servers"]:
                if server["pid"] == second.pid and server["state"] == "waiting":
                    return server
            return None

        server = wait_until(waiting, 20)
        assert server["waiting"]["worker"] == "Slow" and server["waiting"]["ids"] == ["suspect-7"]
        assert server["waiting"]["thread"].startswith("lowkiq-") and 0 < server["waiting"]["for_at_most"] <= 6
        assert server["server"] == f"{socket.gethostname()}:{second.pid}"
        page = client.get("/servers").get_data(as_text=True)
        assert "data-waiting" in page and "suspect-7" in page
        # the suspect done, it serves again
        wait_until(lambda: any(s["pid"] == second.pid and s["state"] == "serving"
                               for s in client.get("/api/v1/servers").get_json()["servers"]), 15)
    finally:
        for server in servers:
            server.kill()
        lowkiq.runtime._current = None
