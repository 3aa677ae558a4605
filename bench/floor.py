"""The round-trip floor: what one Python process can do with redis-py when a job is one no-op script.

Same shape as the server's hot path at batch_size 1 (threads of one
process, one connection each, EVALSHA with a shard's 11 keys and two
arguments), with nothing else: no take, no perform, no decoding. Three ways
to talk to Redis:

- ``command``: ``client.execute_command(...)``, redis-py's public path;
- ``packed``: the command packed once up front, then ``send_packed_command``
  and ``read_response`` on the thread's connection (what a hand-tuned hot
  path can get down to with redis-py and hiredis);
- ``pipelined``: like ``packed``, five scripts per round trip (one thread
  taking from five shards at once).

A lowkiq drain at batch_size 1 is one such round trip per job plus lowkiq's
own work, so the floor bounds it from above on the same machine.
"""

from __future__ import annotations

import socket
import threading
import time

import hiredis
import redis

NOOP = "return 1"
MODES = ("command", "packed", "pipelined")


# A shard's 11 keys, all in one hash slot, as the hot script's calls carry them.
KEYS = [f"lowkiq:v1:{{Floor:0}}:key{i}" for i in range(11)]


def _bulk(part: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(part), part)


def _evalsha(sha: bytes, now: bytes) -> bytes:
    """EVALSHA of ``sha`` with the shard's keys, ``now`` and one more argument, packed."""
    args = [b"EVALSHA", sha, b"11", *(k.encode() for k in KEYS), now, b"1"]
    return b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)


def _bare_socket(client: redis.Redis) -> socket.socket:
    """A socket of its own to ``client``'s Redis, sending at once (no Nagle delay)."""
    kwargs = client.connection_pool.connection_kwargs
    sock = socket.create_connection((kwargs["host"], kwargs["port"]))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _redis_cpu(client: redis.Redis) -> float:
    """Seconds of CPU the Redis server has used so far."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def evalsha_calls_per_second(url: str, *, threads: int, calls: int, mode: str = "command", tries: int = 3) -> float:
    """Scripts run per second (for ``pipelined``, five per round trip): the best of ``tries``, the try
    least disturbed by whatever else the machine runs."""
    return max(_once(url, threads=threads, calls=calls // tries, mode=mode) for _ in range(tries))


def _once(url: str, *, threads: int, calls: int, mode: str) -> float:
    setup = redis.Redis.from_url(url)
    sha = setup.script_load(NOOP)
    packed = _evalsha(sha.encode(), b"1700000000.123456")
    depth = 5 if mode == "pipelined" else 1
    rounds = calls // threads // depth
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        client = redis.Redis.from_url(url, single_connection_client=True)
        client.ping()
        conn = client.connection
        barrier.wait()
        if mode == "command":
            for _ in range(rounds):
                client.execute_command("EVALSHA", sha, 11, *KEYS, time.time(), 1)
        else:
            message = [packed * depth]
            for _ in range(rounds):
                conn.send_packed_command(message)
                for _ in range(depth):
                    conn.read_response()
        client.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    started = time.perf_counter()
    for w in workers:
        w.join()
    return rounds * depth * threads / (time.perf_counter() - started)


def round_trip_cpu(url: str, calls: int = 20_000) -> dict[str, float]:
    """CPU per round trip on a bare socket, one no-op EVALSHA at a time: the client's (this process,
    mostly the send and receive system calls) and Redis's (its event loop, reading, replying).
    A drain at batch_size 1 makes one round trip per job, so neither side can spend less per job."""
    client = redis.Redis.from_url(url)
    sha = client.script_load(NOOP).encode()
    command = b"*3\r\n" + _bulk(b"EVALSHA") + _bulk(sha) + _bulk(b"0")
    with _bare_socket(client) as sock:
        redis_before, cpu_before, wall_before = _redis_cpu(client), time.process_time(), time.perf_counter()
        for _ in range(calls):
            sock.sendall(command)
            sock.recv(65536)
        wall, cpu = time.perf_counter() - wall_before, time.process_time() - cpu_before
        redis_used = _redis_cpu(client) - redis_before
    client.close()
    return {"client_cpu_us": cpu / calls * 1e6, "redis_cpu_us": redis_used / calls * 1e6, "wall_us": wall / calls * 1e6}


def busy_script(usec: float, loops_per_us: float) -> str:
    """A Lua script that keeps Redis busy for about ``usec`` µs per call and writes nothing."""
    return _loop_script(max(0, int(usec * loops_per_us)))


def _loop_script(loops: int) -> str:
    return f"local x = 0 for i = 1, {loops} do x = x + i end return 1"


def calibrate(url: str, calls: int = 2_000) -> float:
    """Loop iterations of ``busy_script`` per µs of Redis CPU on this machine (INFO commandstats)."""
    client = redis.Redis.from_url(url)
    loops = 20_000
    sha = client.script_load(_loop_script(loops))
    client.config_resetstat()
    for _ in range(calls):
        client.evalsha(sha, 0)
    per_call = float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
    client.close()
    return loops / per_call


def threads_round_trip_cpu(url: str, *, threads: int = 5, calls: int = 50_000, script_usec: float = 0.0) -> dict[str, float]:
    """The floor of a server's threads at batch_size 1: ``threads`` threads, each on its own bare socket,
    one EVALSHA (a shard's 11 keys) per round trip, replies parsed by hiredis, no other work. The script
    keeps Redis busy ``script_usec`` µs per call, as the hot script does: how long Redis takes changes
    how often a thread sleeps in ``recv``, and waking costs CPU. Returns the client's CPU per call
    (this process, all threads), Redis's, and calls per second."""
    client = redis.Redis.from_url(url)
    sha = client.script_load(busy_script(script_usec, calibrate(url) if script_usec else 0.0)).encode()
    packed = _evalsha(sha, b"")
    per_thread = calls // threads
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        with _bare_socket(client) as sock:
            reader = hiredis.Reader()
            barrier.wait()
            for _ in range(per_thread):
                sock.sendall(packed)
                reply = False
                while reply is False:
                    reader.feed(sock.recv(65536))
                    reply = reader.gets()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    redis_before, cpu_before = _redis_cpu(client), time.process_time()
    barrier.wait()
    wall_before = time.perf_counter()
    for w in workers:
        w.join()
    wall, cpu = time.perf_counter() - wall_before, time.process_time() - cpu_before
    redis_used = _redis_cpu(client) - redis_before
    client.close()
    done = per_thread * threads
    return {"client_cpu_us": cpu / done * 1e6, "redis_cpu_us": redis_used / done * 1e6, "calls_per_s": done / wall}
