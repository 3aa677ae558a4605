"""The keeper's periodic duties (see ``base``), one module each."""

from .base import MAX_BACKOFF, Duties, Duty, Failure

__all__ = ["MAX_BACKOFF", "Duties", "Duty", "Failure"]
