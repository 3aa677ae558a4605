"""Which shards each server thread owns.

A splitter is a callable taking every shard of every worker, in order
(``A0 A1 A2 B0 B1 B2 B3 C0 D0 D1``), and returning one list per thread of
this node. A shard must be owned by exactly one thread of all nodes: that
exclusivity is what keeps two jobs of one id from ever running at once.

Example, a custom splitter giving every worker its own thread::

    def by_worker(settings):
        def split(shards):
            names = sorted({s.worker.__name__ for s in shards})
            return [[s for s in shards if s.worker.__name__ == n] for n in names]
        return split

    lowkiq.configure(workers=[...], build_splitter=by_worker)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from ..worker import Shard

if TYPE_CHECKING:
    from ..config import Settings
    from ..worker import Worker

T = TypeVar("T")
Splitter = Callable[[Sequence["Shard"]], list[list["Shard"]]]


def all_shards(workers: Sequence[type[Worker]]) -> list[Shard]:
    """Shards listed worker by worker: ``A0 A1 A2 B0 B1 B2 B3 ...``."""
    return [Shard(w, i) for w in workers for i in range(w.shards_count)]


def deal(items: Sequence[T], hands: int) -> list[list[T]]:
    """Round-robin, like cards: item i goes to hand ``i % hands``."""
    return [list(items[h::hands]) for h in range(hands)]


def default(threads: int) -> Splitter:
    """All shards dealt round-robin to this node's threads."""

    def split(shards: Sequence[Shard]) -> list[list[Shard]]:
        return deal(shards, threads)

    return split


def by_node(number_of_nodes: int, node_number: int, threads: int) -> Splitter:
    """Shards dealt to ``number_of_nodes`` nodes first, then this node's part to its threads."""
    if not 0 <= node_number < number_of_nodes:
        raise ValueError(f"node_number must be in 0..{number_of_nodes - 1}, got {node_number}")

    def split(shards: Sequence[Shard]) -> list[list[Shard]]:
        return deal(deal(shards, number_of_nodes)[node_number], threads)

    return split


def build(settings: Settings) -> Splitter:
    """The splitter ``settings.build_splitter`` names: "default", "by_node" or a callable(settings)."""
    choice = settings.build_splitter
    if callable(choice):
        splitter: Callable[[Sequence[Shard]], list[list[Shard]]] = choice(settings)
        return splitter
    threads = settings.threads_per_node
    # Several nodes with the plain round-robin would make two nodes' threads
    # share shards and run one id twice at once; several nodes mean by-node.
    if choice == "by_node" or (choice == "default" and settings.number_of_nodes > 1):
        return by_node(settings.number_of_nodes, settings.node_number, threads)
    if choice == "default":
        return default(threads)
    raise ValueError(f"unknown splitter {choice!r}: use 'default', 'by_node' or a callable(settings)")


def assign(settings: Settings) -> list[list[Shard]]:
    """This node's shards, one list per thread, checked to be a partition of a subset of all shards."""
    shards = all_shards(settings.workers)
    parts = [list(p) for p in build(settings)(shards)]
    seen: set[Shard] = set()
    known = set(shards)
    for part in parts:
        for shard in part:
            if shard not in known:
                raise ValueError(f"the splitter returned {shard!r}, which is not a shard of a configured worker")
            if shard in seen:
                raise ValueError(f"the splitter gave shard {shard} to two threads; each shard needs exactly one")
            seen.add(shard)
    return parts
