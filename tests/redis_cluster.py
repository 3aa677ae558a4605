"""A real Redis Cluster started by the tests: six redis-server processes on loopback, three
primaries with a replica each, formed by ``redis-cli --cluster create``, stopped by pid.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis
from redis_group import ProcessGroup
from redis_server import binary

# A node's cluster bus listens on its port + 10000: both must be free and below 65536.
PORTS = range(20000, 40000)


def cli_binary() -> str:
    """LOWKIQ_TEST_REDIS_CLI, else the redis-cli beside the chosen redis-server, else the one on PATH."""
    chosen = os.environ.get("LOWKIQ_TEST_REDIS_CLI")
    if chosen:
        return chosen
    beside = Path(binary()).with_name("redis-cli")
    if beside.exists():
        return str(beside)
    found = shutil.which("redis-cli")
    if found:
        return found
    raise RuntimeError(
        f"redis-cli not found beside {binary()} nor on PATH: the cluster tests need it "
        "(install redis-tools, or set LOWKIQ_TEST_REDIS_CLI)"
    )


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port(taken: set[int]) -> int:
    for _ in range(1000):
        port = random.choice(PORTS)
        if port not in taken and _free(port) and _free(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisCluster(ProcessGroup):
    def __init__(self, primaries: int = 3, replicas: int = 1) -> None:
        super().__init__("lowkiq-cluster-")
        self.size = primaries * (1 + replicas)
        self.replicas = replicas
        taken: set[int] = set()
        self.ports = []
        for _ in range(self.size):
            self.ports.append(cluster_port(taken))
            taken.add(self.ports[-1])
        self._clients: dict[int, redis.Redis] = {}

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for port in self.ports:
            self.start_node(port)
        for port in self.ports:
            _wait_ping(port)
        create = [cli_binary(), "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                  "--cluster-replicas", str(self.replicas), "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, timeout=timeout)
        if done.returncode != 0:
            self.stop()
            output = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
            raise RuntimeError(f"redis-cli --cluster create failed: {output}")
        self.wait_ok(timeout)
        return self

    def start_node(self, port: int) -> None:
        folder = self.directory / str(port)
        folder.mkdir(exist_ok=True)
        command = [
            binary(), "--port", str(port), "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(folder / "nodes.conf"),
            "--cluster-node-timeout", "1000",
            "--appendonly", "no", "--save", "",
            # a replica's first sync starts at once, not after the default 5 s wait for others
            "--repl-diskless-sync-delay", "0",
            "--dir", str(folder),
            "--logfile", str(folder / "redis.log"),
        ]
        self.spawn(port, command)

    def client(self, port: int) -> redis.Redis:
        if port not in self._clients:
            self._clients[port] = redis.Redis(port=port, socket_timeout=5)
        return self._clients[port]

    def alive(self) -> list[int]:
        return [p for p, process in self.processes.items() if process.poll() is None]

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Every live node says cluster_state:ok, agrees on the slot map and the roles, and every replica is in sync."""
        deadline = time.monotonic() + timeout
        # Nodes that stay split on a slot's owner are repaired after a while, as redis-cli --cluster fix does.
        repair_at = time.monotonic() + 3.0
        last = ""
        while time.monotonic() < deadline:
            try:
                views: dict[tuple, list[int]] = {}
                ok = True
                for port in self.alive():
                    c = self.client(port)
                    if c.cluster("info")["cluster_state"] != "ok":
                        ok = False
                        break
                    views.setdefault((tuple(sorted(self.slot_owners(c))), self.roles(c)), []).append(port)
                    role = c.execute_command("ROLE")
                    if role[0] == b"slave" and role[3] != b"connected":
                        ok = False
                if ok and len(views) == 1:
                    return
                last = f"views={len(views)}: " + "; ".join(f"{ports} see {view[0]}" for view, ports in views.items())
                if ok and time.monotonic() > repair_at:
                    self._reassign_disputed_slots(views)
                    repair_at = time.monotonic() + 2.0
            except (redis.ConnectionError, redis.ResponseError) as exc:
                last = str(exc)
            time.sleep(0.05)
        raise RuntimeError(f"the Redis Cluster did not become ok within {timeout}s ({last})")

    def _reassign_disputed_slots(self, views: dict[tuple, list[int]]) -> None:
        """Give every slot the nodes disagree on to the owner most nodes see, on every primary.

        A slot moved and moved back within a second can stay claimed by the wrong node for good: gossip
        carrying the older move won with a higher config epoch. The owner's epoch is bumped so that its
        claim wins from now on.
        """
        seen: dict[int, dict[int, int]] = {}  # slot -> owner -> nodes seeing it
        for (owners, _), ports in views.items():
            for start, end, owner in owners:
                for slot in range(start, end + 1):
                    counts = seen.setdefault(slot, {})
                    counts[owner] = counts.get(owner, 0) + len(ports)
        disputed = {slot: max(counts, key=counts.__getitem__) for slot, counts in seen.items() if len(counts) > 1}
        for slot, owner in disputed.items():
            owner_id = self.client(owner).execute_command("CLUSTER MYID").decode()
            self.client(owner).execute_command("CLUSTER SETSLOT", slot, "NODE", owner_id)
            self.client(owner).execute_command("CLUSTER BUMPEPOCH")
            for port in {p for _, _, p in self.slot_owners(self.client(owner))} - {owner}:
                self.client(port).execute_command("CLUSTER SETSLOT", slot, "NODE", owner_id)

    def slot_owners(self, c: redis.Redis | None = None) -> list[tuple[int, int, int]]:
        """(first slot, last slot, primary's port) as a live node sees it."""
        c = c or self.client(self.alive()[0])
        return [(int(r[0]), int(r[1]), int(r[2][1])) for r in c.execute_command("CLUSTER SLOTS")]

    def roles(self, c: redis.Redis) -> tuple[tuple[int, str], ...]:
        """(port, master or slave) of every node, as one node sees them (CLUSTER NODES)."""
        nodes = c.execute_command("CLUSTER NODES")  # redis-py parses it: address -> {flags, ...}
        out = []
        for address, info in nodes.items():
            port = int(address.split("@")[0].rpartition(":")[2])
            out.append((port, "master" if "master" in info["flags"].split(",") else "slave"))
        return tuple(sorted(out))

    def primaries(self) -> list[int]:
        return sorted({port for _, _, port in self.slot_owners()})

    def owner(self, slot: int) -> int:
        return next(port for start, end, port in self.slot_owners() if start <= slot <= end)

    def replica_of(self, primary: int) -> int:
        for port in self.alive():
            role = self.client(port).execute_command("ROLE")
            if role[0] == b"slave" and int(role[2]) == primary:
                return port
        raise LookupError(f"no replica of {primary}")

    def node_id(self, port: int) -> str:
        return self.client(port).execute_command("CLUSTER MYID").decode()

    def keyslot(self, key: str) -> int:
        return int(self.client(self.alive()[0]).execute_command("CLUSTER KEYSLOT", key))

    def flush(self) -> None:
        for port in self.primaries():
            self.client(port).flushall()

    def stop(self) -> None:
        for client in self._clients.values():
            client.close()
        super().stop()


def _wait_ping(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    client = redis.Redis(port=port, socket_timeout=1)
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.02)
    raise RuntimeError(f"redis-server did not start on port {port}")
