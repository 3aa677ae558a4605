"""A real Sentinel setup started by the tests: a primary and a replica that require a password,
and three sentinels (quorum 2, a node is down after 1 s), all redis-server processes stopped by pid.
"""

from __future__ import annotations

import time

import redis
from redis_group import ProcessGroup
from redis_server import binary, free_port

SERVICE = "lowkiq-primary"
PASSWORD = "data-secret"


class RedisSentinel(ProcessGroup):
    def __init__(self, sentinels: int = 3) -> None:
        super().__init__("lowkiq-sentinel-")
        self.data_ports = [free_port(), free_port()]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://:{PASSWORD}@{hosts}/{SERVICE}/0"

    def start(self, timeout: float = 30.0) -> RedisSentinel:
        primary, replica = self.data_ports
        self._data_node(primary)
        self._data_node(replica, "--replicaof", "127.0.0.1", str(primary))
        # Sentinels learn the replicas from the primary's INFO, read when they connect and then only
        # every 10 s: start them once the replica is in sync.
        deadline = time.monotonic() + timeout
        while not self._in_sync(replica):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica on {replica} did not sync within {timeout}s")
            time.sleep(0.05)
        for port in self.sentinel_ports:
            conf = self.directory / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"logfile {self.directory / f'sentinel-{port}.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
                f"sentinel auth-pass {SERVICE} {PASSWORD}\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 3000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self.spawn(port, [binary(), str(conf), "--sentinel"])
        self.wait_ready(timeout)
        return self

    def _data_node(self, port: int, *extra: str) -> None:
        folder = self.directory / str(port)
        folder.mkdir()
        command = [
            binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            "--save", "", "--appendonly", "no", "--logfile", str(folder / "redis.log"),
            "--requirepass", PASSWORD, "--masterauth", PASSWORD, *extra,
            # a replica's first sync starts at once, not after the default 5 s wait for others
            "--repl-diskless-sync-delay", "0",
        ]
        self.spawn(port, command)

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=2, decode_responses=True)

    def data(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=PASSWORD, socket_timeout=2)

    def primary(self) -> int:
        """The primary's port, as a majority of the live sentinels name it."""
        votes: dict[int, int] = {}
        for port in self.alive_sentinels():
            try:
                _, p = self.sentinel(port).sentinel_get_master_addr_by_name(SERVICE)
                votes[int(p)] = votes.get(int(p), 0) + 1
            except (redis.ConnectionError, TypeError):
                continue
        return max(votes, key=lambda p: votes[p])

    def alive_sentinels(self) -> list[int]:
        return [p for p in self.sentinel_ports if self.processes[p].poll() is None]

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Every sentinel knows the primary, the other sentinels and a replica, which is in sync."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                primary = self.primary()
                others = len(self.alive_sentinels()) - 1
                for port in self.alive_sentinels():
                    s = self.sentinel(port)
                    state = s.sentinel_master(SERVICE)
                    if int(state["port"]) != primary or state["num-other-sentinels"] < others or \
                            not any(self._promotable(r) for r in s.sentinel_slaves(SERVICE)):
                        # (a replica the sentinel last saw with its link down, e.g. the old primary just made to
                        # follow, is refused by SENTINEL FAILOVER with NOGOODSLAVE until its INFO says otherwise)
                        last = f"sentinel {port}: {state.get('flags')}, {state['num-other-sentinels']} others, " \
                               f"replicas {s.sentinel_slaves(SERVICE)}"
                        break
                else:
                    # (a sentinel's own view of the replica's link is refreshed only every 10 s)
                    replicas = [p for p in self.data_ports if p != primary and self.processes[p].poll() is None]
                    if all(self._in_sync(p) for p in replicas):
                        return
                    last = "the replica is not in sync yet"
            except (redis.ConnectionError, redis.ResponseError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.05)
        raise RuntimeError(f"the Sentinel setup was not ready within {timeout}s ({last})")

    @staticmethod
    def _promotable(replica: dict) -> bool:
        """A replica as a sentinel sees it that SENTINEL FAILOVER would promote: up, its link to the primary up."""
        flags = replica.get("flags", "")
        flags = flags if isinstance(flags, str) else ",".join(sorted(flags))
        return ("s_down" not in flags and "disconnected" not in flags and replica.get("master-link-status") == "ok"
                and int(replica.get("master-link-down-time", 0) or 0) == 0)

    def _in_sync(self, replica: int) -> bool:
        try:
            role = self.data(replica).execute_command("ROLE")
        except redis.ConnectionError:
            return False
        return role[0] == b"slave" and role[3] == b"connected"

    def failover(self, timeout: float = 20.0) -> tuple[int, int]:
        """SENTINEL FAILOVER; returns (old primary, new primary) once every sentinel names the new one."""
        before = self.primary()
        self.ask_failover()
        return before, self.wait_new_primary(before, timeout)

    def ask_failover(self, timeout: float = 15.0) -> None:
        """SENTINEL FAILOVER, asked again while the sentinel answers NOGOODSLAVE: its view of a replica's link
        is refreshed only by its periodic INFO, so a replica in sync may still look unpromotable for a while."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sentinel(self.sentinel_ports[0]).execute_command("SENTINEL FAILOVER", SERVICE)
                return
            except redis.ResponseError as exc:
                if "NOGOODSLAVE" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def wait_new_primary(self, before: int, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                named = {self.sentinel(p).sentinel_get_master_addr_by_name(SERVICE)[1] for p in self.alive_sentinels()}
                if len(named) == 1 and (after := int(named.pop())) != before and \
                        self.data(after).execute_command("ROLE")[0] == b"master":
                    if self.processes[before].poll() is None:
                        # What the sentinels do a few seconds later anyway: the old primary follows.
                        self.data(before).execute_command("REPLICAOF", "127.0.0.1", after)
                    return after
            except (redis.ConnectionError, redis.ResponseError, ValueError, TypeError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"no new primary within {timeout}s")

