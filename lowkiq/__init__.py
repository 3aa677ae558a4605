"""lowkiq: ordered background-job processing on Redis.

Jobs with the same id never run concurrently and are merged, so a burst of
updates to one entity becomes one job with its versions in order.
"""

from .errors import (
    AppFileError,
    BadInput,
    ConfigurationError,
    ConfirmationRefused,
    EmbeddedRedisError,
    LayoutChangeRefused,
    LayoutMismatch,
    LeaseRefused,
    LowkiqError,
    MetricsPortError,
    NotConfigured,
    NotDurable,
    NoWorkers,
    PartialEnqueue,
    PartialFailure,
    PayloadDecodeError,
    PerformStopped,
    PinningError,
    RedisOutOfMemory,
    RegistryFull,
    TimeLimitExceeded,
    UnknownWorker,
    WorkerCrashed,
)
from .job_context import context
from .jobs import Job, MorgueJob
from .runtime import configure, current
from .schedule import Schedule
from .transport.errors import PartialWrite, TopologyError
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "AppFileError", "BadInput", "ConfigurationError", "ConfirmationRefused", "EmbeddedRedisError", "Job",
    "LayoutChangeRefused", "LayoutMismatch", "LeaseRefused", "LowkiqError", "MetricsPortError", "MorgueJob",
    "NoWorkers", "NotConfigured", "NotDurable", "PartialEnqueue", "PartialFailure", "PartialWrite",
    "PayloadDecodeError", "PerformStopped", "PinningError", "RedisOutOfMemory", "RegistryFull", "Schedule",
    "TimeLimitExceeded", "TopologyError", "UnknownWorker", "Worker", "WorkerCrashed", "__version__", "configure",
    "context", "current",
]
