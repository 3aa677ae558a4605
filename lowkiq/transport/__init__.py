"""The one way lowkiq reaches Redis: standalone, Redis Cluster or Sentinel, through the same code.

- ``Transport(url, pool_size=, timeout=)``: the deployment (found on first
  use), its nodes' pools, and calls routed by slot;
- ``Session``: connections held across calls, for a server thread's hot path;
- ``Batch``: packed commands with their slots, planned per node once;
- ``PartialWrite``: raised when some calls of one step ran and others did not.
"""

from .batch import Batch, NodeReply
from .errors import NotSent, PartialWrite, TopologyError
from .session import Session
from .slots import key_slot, keyset_slot
from .transport import Transport, as_transport

__all__ = [
    "Batch", "NodeReply", "NotSent", "PartialWrite", "Session", "TopologyError", "Transport",
    "as_transport", "key_slot", "keyset_slot",
]
