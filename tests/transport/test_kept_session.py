"""The session a transport keeps between one-call borrowers (``Transport.borrow``): reused while sound, never
when Redis closed it, never by a forked child, and closed with the transport."""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator

import pytest
import redis

from lowkiq.transport import Transport


def client_id(transport: Transport) -> int:
    """The id of the connection that served this call."""
    return int(transport.pipeline_commands([("k", ("CLIENT", "ID"))])[0])


def connections(admin: redis.Redis, name: str) -> list[dict]:
    return [c for c in admin.client_list() if c.get("name") == name]


@pytest.fixture
def transport(redis_url: str) -> Iterator[Transport]:
    transport = Transport(redis_url, pool_size=3, timeout=5.0)
    yield transport
    transport.close()


def test_one_call_after_another_uses_one_connection(transport: Transport, r: redis.Redis):
    first = client_id(transport)
    assert [client_id(transport) for _ in range(20)] == [first] * 20
    session = transport.borrow()
    transport.give_back(session)
    assert transport.borrow() is session  # kept, not given back to the pool
    transport.give_back(session)
    transport.pipeline_commands([("k", ("CLIENT", "SETNAME", "kept"))])
    assert len(connections(r, "kept")) == 1


def test_a_connection_redis_closed_while_kept_is_not_used(transport: Transport, r: redis.Redis):
    first = client_id(transport)
    r.client_kill_filter(_id=first)  # as an idle timeout or a restart would
    again = client_id(transport)  # no error: the kept session was seen closed and let go
    assert again != first
    assert client_id(transport) == again


def test_a_reply_left_unread_makes_the_kept_session_unsound(transport: Transport):
    # No call gives its session back with a reply in flight (an interrupted call closes it); one that arrived
    # and was never read, whatever left it, must not be read as the next call's.
    client_id(transport)
    session = transport.borrow()
    (link,) = session._links.values()
    link.send(b"*1\r\n$4\r\nPING\r\n")
    assert select.select([link.connection._sock], [], [], 5)[0], "Redis did not answer PING in 5 s"
    transport.give_back(session)
    assert transport.pipeline_commands([("k", ("ECHO", "mine"))]) == [b"mine"]


def test_threads_borrow_at_once_and_one_session_is_kept(transport: Transport, r: redis.Redis):
    barrier = threading.Barrier(3)
    seen: list[int] = []

    def call() -> None:
        barrier.wait()
        for _ in range(50):
            seen.append(client_id(transport))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(seen) == 150
    kept = client_id(transport)
    transport.pipeline_commands([("k", ("CLIENT", "SETNAME", "after-threads"))])
    assert client_id(transport) == kept and len(connections(r, "after-threads")) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is a POSIX call")
def test_a_forked_child_does_not_use_its_parents_kept_connection(transport: Transport):
    parent = client_id(transport)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, and the parent's left open for the parent
        try:
            os.write(write, str(client_id(transport)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = int(os.read(read, 64))
    os.close(read)
    os.waitpid(pid, 0)
    assert child != parent
    assert client_id(transport) == parent  # the parent's kept connection still serves it


def test_closing_the_transport_closes_the_kept_connection(transport: Transport, r: redis.Redis):
    transport.pipeline_commands([("k", ("CLIENT", "SETNAME", "to-close"))])
    assert len(connections(r, "to-close")) == 1
    transport.close()
    assert connections(r, "to-close") == []
    assert client_id(transport) > 0  # a closed transport opens new connections when used again
