"""lowkiq: ordered background-job processing on Redis.

Jobs with the same id never run concurrently and are merged, so a burst of
updates to one entity becomes one job with its versions in order.
"""

from .job_context import context
from .errors import LayoutMismatch, NotDurable, PartialEnqueue
from .jobs import Job, MorgueJob
from .runtime import configure, current
from .worker import Worker

__version__ = "0.1.0"

__all__ = ["Worker", "configure", "context", "current", "Job", "MorgueJob", "LayoutMismatch", "NotDurable", "PartialEnqueue", "__version__"]
