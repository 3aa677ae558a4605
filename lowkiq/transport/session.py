"""Pipelined commands, each sent to the node that owns its slot.

A batch is grouped by node, sent to every node, then every reply is read:
one round trip of wall time whatever the number of nodes. Replies that say
a command did not run are followed here, and only those commands are sent
again:

- MOVED: the slot map is refreshed (with the new owner named in the reply)
  and the command resent at once;
- ASK: resent to the named node, preceded by ASKING;
- TRYAGAIN (a multi-key command while its slot migrates): resent after
  10-50 ms;
- NOSCRIPT: the script is loaded on that node (SCRIPT LOAD is not
  replicated: a promoted replica lacks it) and the call resent;
- READONLY (the primary became a replica), or no connection to the node
  (nothing was sent): the deployment is read again and the command resent
  if another node serves its slot now.

Anything else (CLUSTERDOWN, LOADING, a lost connection) is left in the
command's place for the caller to raise: an outage. A connection lost while
sending leaves the commands it did not wholly send as NotSent (Redis never
ran them) and keeps the replies already received: a caller learns which
calls ran, which did not, and which may have (their reply was lost).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import redis
from redis.exceptions import AskError, MovedError, NoScriptError, ReadOnlyError, TryAgainError

from .batch import Batch, NodeReply
from .errors import NotSent, on_node
from .resp import ASKING, Link, pack, whole_commands
from .topology import Node, Topology

if TYPE_CHECKING:
    # An import cycle on purpose, for type names only: transport.py builds sessions on itself.
    from .transport import Transport

DISCARD = -1  # the +OK of an ASKING
MAX_REDIRECTS = 16
MAX_TRYAGAIN = 40  # x 10-50 ms: a migrating slot's keys move within a second or two
LOST = (redis.ConnectionError, redis.TimeoutError, OSError)
FOLLOWED = (AskError, TryAgainError, NoScriptError, ReadOnlyError, NotSent)  # MovedError is an AskError
# Resent only when another node serves the slot after a fresh look at the deployment.
MOVED_ON = (ReadOnlyError, NotSent)


class Send(NamedTuple):
    """What one node receives in a round: ``data``, whose replies go to ``targets`` (call indexes, or
    DISCARD), then one more reply when ``extra`` (the command sent to every node)."""

    node: Node
    data: bytes
    targets: list[int]
    extra: bool


class Session:
    """Connections to the nodes, held across calls (a server thread's) or for one call (borrowed)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._pid = os.getpid()  # a forked child must not use its parent's sockets
        self._links: dict[Node, Link] = {}
        self._generation = -1
        self._sent_with: Topology | None = None

    def execute(self, batch: Batch, *, each_node: Sequence[Any] | None = None,
                replicas: bool = False) -> tuple[list[Any], Sequence[NodeReply]]:
        """Replies in the order of the batch (errors in place), and the replies to ``each_node``."""
        topology = self.transport.topology()
        if topology.generation != self._generation:
            self._prune(topology)
        extras: dict[Node, Any] = {}
        try:
            if topology.slots is None:  # one node serves everything: no grouping (the hot path)
                extra = None if each_node is None else pack(each_node)
                results = self._one_node(topology.primaries[0], batch, topology, extra, extras)
            else:
                extra = None if each_node is None else pack(each_node)
                results = [None] * len(batch.packed)
                sends = [Send(node, data, idxs, False) for node, idxs, data in batch.plan(topology)]
                if extra is not None:
                    planned = {send.node: n for n, send in enumerate(sends)}
                    for node in topology.nodes(replicas=replicas):
                        if node in planned:
                            send = sends[planned[node]]
                            sends[planned[node]] = Send(node, send.data + extra, send.targets, True)
                        else:
                            sends.append(Send(node, extra, [], True))
                follow = self._round(sends, results, extras)
                if follow:
                    self._follow(batch, follow, results, topology)
        except BaseException:
            # Interrupted between a send and its replies: no connection may keep unread replies.
            self.close(disconnect=True)
            raise
        if not extras:
            return results, ()
        return results, [NodeReply(node.name, node in topology.primaries, extras[node])
                         for node in topology.nodes(replicas=replicas) if node in extras]

    def quick(self, data: bytes, count: int) -> tuple[list[Any], int] | None:
        """The hot path: ``count`` packed commands to the one node of a standalone or Sentinel-managed
        Redis, on the connection this session already holds. Returns the replies and how many are
        errors, or None when this does not apply (nothing was sent: use ``execute``). Replies that
        ask for more (NOSCRIPT, READONLY) are for ``follow`` to act on.
        """
        topology = self.transport.topology()
        if topology.slots is not None or topology.generation != self._generation:
            return None
        node = topology.primaries[0]
        link = self._links.get(node)
        if link is None:
            return None
        self._sent_with = topology
        results: list[Any] = []
        send = Send(node, data, list(range(count)), False)
        try:
            link.send(data)
        except LOST as exc:
            results = [None] * count
            self._cut(link, exc, send, results, {})
            return results, sum(isinstance(r, BaseException) for r in results)
        except BaseException:
            self.close(disconnect=True)
            raise
        try:
            return results, link.read_into(results, count)
        except LOST as exc:
            read = len(results)
            results += [None] * (count - read)
            self._lost(node, exc, send, read, results, {})
            return results, count - read
        except BaseException:
            self.close(disconnect=True)
            raise

    def follow(self, batch: Batch, results: list[Any]) -> None:
        """After ``quick``: resend what the replies say did not run (see the module's docstring)."""
        topology = self._sent_with
        assert topology is not None, "follow() comes after quick()"
        node = topology.primaries[0]
        follow = [(i, node) for i, r in enumerate(results) if isinstance(r, FOLLOWED)]
        if follow:
            try:
                self._follow(batch, follow, results, topology)
            except BaseException:
                self.close(disconnect=True)
                raise

    def _one_node(self, node: Node, batch: Batch, topology: Topology, extra: bytes | None,
                  extras: dict[Node, Any]) -> list[Any]:
        """The hot path of a standalone Redis: one send, the replies, no grouping."""
        count = len(batch.packed)
        results: list[Any] = []
        try:
            link = self._links.get(node) or self._link(node)
        except LOST as exc:
            results = [on_node(exc, node.name, sent=False)] * count
            if extra is not None:
                extras[node] = results[0] if count else on_node(exc, node.name, sent=False)
            self.transport.suspect()
            self._follow(batch, [(i, node) for i in range(count)], results, topology)
            return results
        data = batch._joined or batch.joined()
        send = Send(node, data if extra is None else data + extra, list(range(count)), extra is not None)
        try:
            link.send(send.data)
        except LOST as exc:
            results = [None] * count
            self._cut(link, exc, send, results, extras)
            return results
        try:
            errors = link.read_into(results, count + (extra is not None))
        except LOST as exc:
            read = len(results)
            results += [None] * (count + (extra is not None) - read)
            self._lost(node, exc, send, read, results, extras)
            return results[:count]
        if extra is not None:
            extras[node] = results.pop()
        if errors:
            follow = [(i, node) for i, r in enumerate(results) if isinstance(r, FOLLOWED)]
            if follow:
                self._follow(batch, follow, results, topology)
        return results

    def _round(self, sends: list[Send], results: list[Any], extras: dict[Node, Any]) -> list[tuple[int, Node]]:
        """One send to every node, then every reply; returns the calls to follow and who answered."""
        sent = []
        follow = []
        for send in sends:
            try:
                link = self._link(send.node)
            except LOST as exc:  # nothing sent: another node may serve these after a fresh look
                self._lost(send.node, exc, send, 0, results, extras, sent=False)
                follow += [(target, send.node) for target in send.targets if target >= 0]
                continue
            try:
                link.send(send.data)
            except LOST as exc:
                self._cut(link, exc, send, results, extras)
                continue
            sent.append((send, link))
        for send, link in sent:
            node, targets = send.node, send.targets
            got: list[Any] = []
            try:
                errors = link.read_into(got, len(targets) + send.extra)
            except LOST as exc:
                self._lost(node, exc, send, len(got), results, extras)
                errors = -1  # got is short: the rest already holds the error
            if send.extra and len(got) == len(targets) + 1:
                extras[node] = got.pop()
            if errors == 0 and DISCARD not in targets:
                for target, reply in zip(targets, got, strict=True):
                    results[target] = reply
                continue
            for target, reply in zip(targets, got, strict=False):
                if target >= 0:
                    results[target] = reply
                    if isinstance(reply, FOLLOWED):
                        follow.append((target, node))
        return follow

    def _follow(self, batch: Batch, follow: list[tuple[int, Node]], results: list[Any], topology: Topology) -> None:
        """Resend what did not run, as the replies say (see the module's docstring); ``topology`` was used to send."""
        asking: dict[int, Node] = {}
        redirects = tries = 0
        while follow:
            hints: dict[int, tuple[str, int]] = {}
            relook = pause = False
            loaded: set[tuple[Node, int]] = set()
            again = []
            for i, node in follow:
                error = results[i]
                if isinstance(error, MovedError):
                    asking.pop(i, None)
                    hints[error.slot_id] = self._address(error, node)
                elif isinstance(error, AskError):
                    asking[i] = self.transport.node_at(*self._address(error, node))
                elif isinstance(error, TryAgainError):
                    pause = True
                elif isinstance(error, NoScriptError):
                    if not self._load(node, batch, i, loaded, results):
                        continue
                elif isinstance(error, MOVED_ON):
                    relook = True
                again.append(i)
            redirects += bool(hints or asking or relook)
            tries += pause
            if not again or redirects > MAX_REDIRECTS or tries > MAX_TRYAGAIN:
                return
            before = topology
            try:
                topology = self.transport.refresh(hints=hints) if hints or relook else self.transport.topology()
            except (*LOST, redis.RedisError):
                # The deployment cannot be read now: what did not run stays undone, each reply saying why.
                self.transport.suspect()
                return
            if relook:
                # Resend only what another node serves now; a primary still read-only or unreachable
                # is an outage (no failover yet): look again before the next call.
                again = [i for i in again if not isinstance(results[i], MOVED_ON)
                         or topology.node_for(batch.slots[i]) is not before.node_for(batch.slots[i])]
                if any(isinstance(results[i], MOVED_ON) for i, _ in follow if i not in again):
                    self.transport.suspect()
            if topology.generation != self._generation:
                self._prune(topology)
            if pause:
                time.sleep(random.uniform(0.01, 0.05))
            by_node: dict[Node, tuple[list[bytes], list[int]]] = {}
            for i in again:
                target = asking.get(i) or topology.node_for(batch.slots[i])
                chunks, targets = by_node.setdefault(target, ([], []))
                if i in asking:
                    chunks.append(ASKING)
                    targets.append(DISCARD)
                chunks.append(batch.packed[i])
                targets.append(i)
            follow = self._round([Send(node, b"".join(c), t, False) for node, (c, t) in by_node.items()], results, {})

    def _load(self, node: Node, batch: Batch, i: int, loaded: set[tuple[Node, int]], results: list[Any]) -> bool:
        """SCRIPT LOAD of call ``i``'s script (and the batch's library) on ``node``, one round trip;
        False (the error in place) when that fails."""
        source = batch.sources[i] if batch.sources else None
        if source is None:
            return False
        if (node, id(source)) in loaded:
            return True
        sources = [source, *(s for s in batch.library if s is not source)]
        got: list[Any] = []
        try:
            link = self._link(node)
            link.send(b"".join(pack(("SCRIPT", "LOAD", s)) for s in sources))
            link.read_into(got, len(sources))
        except LOST as exc:
            self._lost(node, exc, Send(node, b"", [i], False), 0, results, {}, sent=False)  # i was not resent yet
            return False
        if isinstance(got[0], BaseException):
            results[i] = got[0]
            return False
        loaded.update((node, id(s)) for s, reply in zip(sources, got, strict=True)
                      if not isinstance(reply, BaseException))
        return True

    def _address(self, error: AskError, node: Node) -> tuple[str, int]:
        host, port = error.node_addr
        # A node that does not know its own address redirects to ":port": the one that answered.
        return (host or node.name.rpartition(":")[0], port)

    def _link(self, node: Node) -> Link:
        link = self._links.get(node)
        if link is None:
            link = self._links[node] = Link(node.pool)
        return link

    def _cut(self, link: Link, exc: BaseException, send: Send, results: list[Any], extras: dict[Node, Any]) -> None:
        """Sending ``send`` failed part way: the replies already received go in place, the commands Redis
        may have received get the error (their outcome is unknown), the others NotSent (they never ran)."""
        whole = whole_commands(send.data, link.sent)
        got: list[Any] = []
        link.read_ready(got, whole)
        for target, reply in zip(send.targets, got, strict=False):
            if target >= 0:
                results[target] = reply
        if send.extra and len(got) > len(send.targets):
            extras[send.node] = got[-1]
        self._lost(send.node, exc, send, len(got), results, extras, whole=whole)

    def _lost(self, node: Node, exc: BaseException, send: Send, start: int, results: list[Any],
              extras: dict[Node, Any], *, sent: bool = True, whole: int | None = None) -> None:
        """The connection to ``node`` failed after ``start`` replies of ``send``: the rest get the error, and
        NotSent from the ``whole`` commands sent on (when a send failed part way)."""
        error = on_node(exc, node.name, sent=sent)
        unsent = on_node(exc, node.name, sent=False)
        stop = len(send.targets) + send.extra if whole is None else whole
        for n, target in enumerate(send.targets[start:], start):
            if target >= 0:
                results[target] = error if n < stop else unsent
        if send.extra and start <= len(send.targets):
            extras[node] = error if len(send.targets) < stop else unsent
        link = self._links.pop(node, None)
        if link is not None:
            link.close(disconnect=True)
        self.transport.suspect()

    def _prune(self, topology: Topology) -> None:
        """Release the connections to nodes that no longer serve (after a failover or a new map)."""
        current = set(topology.nodes(replicas=True))
        for node in [n for n in self._links if n not in current]:
            self._links.pop(node).close()
        self._generation = topology.generation

    def sound(self) -> bool:
        """Whether it may serve another call: made by this process, and none of its connections has anything to
        read (a reply nobody asked for, or the server's close after an idle timeout or a restart)."""
        return self._pid == os.getpid() and all(link.idle() for link in self._links.values())

    def discard(self) -> None:
        """Let go of a session that is not sound: its connections closed, or, in a forked child, left alone
        (they are the parent's; the child's pools start afresh)."""
        if self._pid == os.getpid():
            self.close(disconnect=True)
        else:
            self._links = {}

    def close(self, *, disconnect: bool = False) -> None:
        """Give every connection back to its pool."""
        links, self._links = self._links, {}
        for link in links.values():
            link.close(disconnect=disconnect)
