"""lowkiq: ordered background-job processing on Redis.

Jobs with the same id never run concurrently and are merged, so a burst of
updates to one entity becomes one job with its versions in order.
"""

from .errors import LayoutMismatch, NotDurable, PartialEnqueue, RedisOutOfMemory
from .job_context import context
from .jobs import Job, MorgueJob
from .runtime import configure, current
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Job", "LayoutMismatch", "MorgueJob", "NotDurable", "PartialEnqueue", "RedisOutOfMemory", "Worker", "__version__",
    "configure", "context", "current",
]
