"""Jobs as users enqueue them, and as the queue hands them back."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .serializers import DumpPayload, to_bytes

# Dependencies one job may name in ``after`` (docs/dependencies.md): each costs a script call at enqueue.
MAX_AFTER = 16
ALLOWED_KEYS = frozenset({"id", "payload", "score", "perform_in", "group", "after", "tags"})
# A group names a tenant in Redis (the fairness indexes); the console shows it in pages and metric labels.
MAX_GROUP_LENGTH = 200
# Tags (docs/tags.md): each one costs an index entry per id, so a job carries a few short ones.
MAX_TAGS = 16
MAX_TAG_LENGTH = 64


@dataclass(frozen=True, slots=True)
class Clipped:
    """What a read cut from a job to keep its reply under a byte cap (the console's listings and exports,
    and its job page past a larger cap). Jobs read whole have ``clipped`` None."""

    payloads: int  # payloads the job holds
    shown: int  # of them in ``payloads``, the last one maybe cut (a ClippedPayload)
    bytes: int  # of the stored payload list
    cap: int  # bytes of payloads the read carried at most
    error_bytes: int = 0  # of the stored error (and traceback) when they were cut too, else 0

    def as_json(self) -> dict[str, int]:
        return {"payloads": self.payloads, "payloads_shown": self.shown, "payloads_bytes": self.bytes,
                "cap_bytes": self.cap, "error_bytes": self.error_bytes}


@dataclass(frozen=True, slots=True)
class ClippedPayload:
    """The head of a payload cut at a read's byte cap; ``size`` is the whole payload's, in bytes."""

    head: bytes
    size: int

    def __repr__(self) -> str:
        return f"{self.head.decode('utf-8', 'replace')}... <payload cut: {len(self.head):,} of {self.size:,} bytes shown>"


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and the
# server builds one Job per id taken (its payload list makes it unhashable anyway).
@dataclass(slots=True)
class Job:
    """A job in the queue or in processing. ``payloads`` ascend by score."""

    id: str
    payloads: list[tuple[Any, float]]
    perform_in: float
    retry_count: int
    error: str | None = None
    traceback: str | None = None  # of the last failure, capped (traceback_limit)
    clipped: Clipped | None = None  # what a capped read left out; None when read whole


@dataclass(frozen=True, slots=True)
class MorgueJob:
    """A dead job: never processed until an operator requeues it."""

    id: str
    payloads: list[tuple[Any, float]]
    updated_at: float
    error: str | None = None
    traceback: str | None = None  # of the failure that sent it to the morgue, capped
    clipped: Clipped | None = None  # what a capped read left out; None when read whole


@dataclass(frozen=True, slots=True)
class UndecodablePayload:
    """What the console shows for a payload ``load_payload`` cannot read, instead of failing the page."""

    raw: bytes
    error: str

    def __repr__(self) -> str:
        return f"<undecodable payload ({self.error}): {self.raw[:200]!r}>"


class PreparedJob(NamedTuple):
    """A validated job. ``perform_in`` and ``score`` None: now, in Redis server time, taken when written."""

    id: str
    perform_in: float | None
    payload: bytes
    score: float | None
    group: str | None = None  # docs/fairness.md; None: the default group
    after: tuple[tuple[str, str], ...] = ()  # (worker name, id) of each dependency; docs/dependencies.md
    tags: tuple[str, ...] = ()  # docs/tags.md; distinct, in the order given


# C0 controls and DEL: an id holding one cannot round-trip through an HTML form (NUL becomes
# U+FFFD, CR LF becomes LF) nor a log line. Searched only in ids that are not isprintable().
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_id(value: Any, index: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"job {index}: id must be a str or an int, got {type(value).__name__} {value!r}")
    text = _int_id(value, index) if isinstance(value, int) else value
    if not text:
        raise ValueError(f"job {index}: id must not be empty")
    _check_printable(text, index)
    return text


def _int_id(value: int, index: int) -> str:
    try:
        return str(value)
    except ValueError:  # past sys.get_int_max_str_digits(): thousands of digits
        raise ValueError(f"job {index}: id is an int of {value.bit_length()} bits, too long to be written as text") from None


def _check_printable(job_id: str, index: int) -> None:
    if not job_id.isprintable():
        control = _CONTROL.search(job_id)
        if control:
            raise ValueError(f"job {index}: id {job_id!r} contains the control character {control.group()!r}; "
                             f"ids must be printable text")


def _number(value: Any, field: str, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"job {index}: {field} must be a number (unix time or version), got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"job {index}: {field} {value!r} is too large for a double") from None
    if not math.isfinite(number):
        raise ValueError(f"job {index}: {field} must be finite, got {value!r}")
    return number


def normalize_group(value: Any, index: int) -> str | None:
    """A job's ``group``: None (the default group) or a non-empty printable string of at most 200 characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"job {index}: group must be a non-empty str or None, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"job {index}: group must not be empty (use None, or no 'group', for no group)")
    if len(value) > MAX_GROUP_LENGTH:
        raise ValueError(f"job {index}: group {value[:40]!r}... is {len(value)} characters long; "
                         f"at most {MAX_GROUP_LENGTH}")
    if not value.isprintable():
        raise ValueError(f"job {index}: group {value!r} must be printable text (no control characters)")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(f"job {index}: group {value!r} is not valid UTF-8 text: {exc.reason}") from None
    if value.startswith("(") and value.endswith(")"):
        # the console's and the metrics' own rows, e.g. "(other)" summing the groups not listed
        raise ValueError(f"job {index}: group {value!r} is reserved: names in parentheses are the console's")
    return value


def normalize_after(value: Any, index: int) -> tuple[tuple[str, str], ...]:
    """A job's ``after``: a list of ``{"worker": name, "id": id}``, at most 16, returned as (worker, id) pairs.

    Only the shape is checked here; that each worker is configured and no entry names the job itself is
    checked where the job's worker is known (lowkiq.dependencies).
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"job {index}: after must be a list of {{'worker': name, 'id': id}}, "
                        f"got {type(value).__name__} {value!r}")
    if len(value) > MAX_AFTER:
        raise ValueError(f"job {index}: after names {len(value)} dependencies; at most {MAX_AFTER}")
    pairs: list[tuple[str, str]] = []
    for k, entry in enumerate(value):
        where = f"after[{k}]"
        if not isinstance(entry, Mapping):
            raise TypeError(f"job {index}: {where} must be a dict {{'worker': name, 'id': id}}, "
                            f"got {type(entry).__name__} {entry!r}")
        if set(entry) != {"worker", "id"}:
            raise ValueError(f"job {index}: {where} must have exactly the keys 'worker' and 'id', "
                             f"got {sorted(map(str, entry))}")
        worker = entry["worker"]
        if not isinstance(worker, str) or not worker:
            raise TypeError(f"job {index}: {where}: worker must be a worker's name (a non-empty str), got {worker!r}")
        try:
            dependency = normalize_id(entry["id"], index)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"job {index}: {where}: {str(exc).removeprefix(f'job {index}: ')}") from None
        pair = (worker, dependency)
        if pair not in pairs:
            pairs.append(pair)
    return tuple(pairs)


def tag_problem(tag: Any) -> tuple[type[Exception], str] | None:
    """Why ``tag`` cannot be a tag (the error's type and what to say), or None when it can."""
    if not isinstance(tag, str):
        return TypeError, f"must hold only str, got {type(tag).__name__} {tag!r:.100}"
    if not tag:
        return ValueError, "must not hold an empty tag"
    if len(tag) > MAX_TAG_LENGTH:
        return ValueError, f"{tag[:40]!r}... is {len(tag)} characters long; at most {MAX_TAG_LENGTH}"
    if not tag.isprintable():
        return ValueError, f"{tag!r} must be printable text (no control characters)"
    try:
        tag.encode()
    except UnicodeEncodeError as exc:
        return ValueError, f"{tag!r} is not valid UTF-8 text: {exc.reason}"
    return None


def normalize_tags(value: Any, index: int) -> tuple[str, ...]:
    """A job's ``tags``: a list (or tuple) of at most 16 non-empty printable strings of at most 64
    characters each, duplicates dropped; TypeError or ValueError naming ``tags`` otherwise."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"job {index}: tags must be a list of str, got {type(value).__name__} {value!r:.100}")
    if len(value) > MAX_TAGS:
        raise ValueError(f"job {index}: tags holds {len(value)} tags; at most {MAX_TAGS}")
    for tag in value:
        problem = tag_problem(tag)
        if problem:
            kind, text = problem
            raise kind(f"job {index}: tags {text}")
    return tuple(dict.fromkeys(value))


def job_list(jobs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``perform_async``'s argument as a list; one job alone (a dict) or a string is refused, not iterated."""
    if isinstance(jobs, (Mapping, str, bytes)):
        raise TypeError("perform_async takes a list of jobs, e.g. [{'id': 1, 'payload': {...}}]")
    return list(jobs)


def prepare(jobs: Iterable[Mapping[str, Any]], *, now: float | None, dump_payload: DumpPayload) -> list[PreparedJob]:
    """Validate and serialize a whole batch before anything is written.

    ``now`` None leaves a missing score and perform_in to the push script, which takes
    them from the Redis server's clock (so that producers on different hosts agree).
    Raises TypeError or ValueError naming the first bad job's index.
    """
    prepared = []
    # Jobs without a score get now, each a hair later than the one before, so that
    # a burst sent in one call reaches perform in the order it was given.
    default_score = now
    for index, job in enumerate(jobs):
        if type(job) is not dict and not isinstance(job, Mapping):
            raise TypeError(f"job {index}: must be a dict with 'id', got {type(job).__name__}")
        if not ALLOWED_KEYS.issuperset(job):
            unknown = set(job) - ALLOWED_KEYS
            raise ValueError(f"job {index}: unknown keys {sorted(map(str, unknown))}; "
                             f"allowed: id, payload, score, perform_in, group, after, tags")
        if "id" not in job:
            raise ValueError(f"job {index}: missing 'id'")
        raw_id = job["id"]
        # Fast path for the common id types; normalize_id explains the rest.
        if type(raw_id) is str and raw_id:
            job_id = raw_id
            if not job_id.isprintable():  # a C call; the search runs only for ids it flags
                _check_printable(job_id, index)
        elif type(raw_id) is int:
            job_id = _int_id(raw_id, index)
        else:
            job_id = normalize_id(raw_id, index)
        if "score" in job:
            score = _number(job["score"], "score", index)
        elif default_score is None:
            score = None
        else:
            score = default_score
            default_score = math.nextafter(default_score, math.inf)
        perform_in = _number(job["perform_in"], "perform_in", index) if "perform_in" in job else now
        try:
            payload = to_bytes(dump_payload(job.get("payload", "")))
        except (TypeError, ValueError, OverflowError) as exc:
            raise type(exc)(f"job {index} (id {job_id!r}): payload cannot be serialized: {exc}") from exc
        except RecursionError as exc:
            raise ValueError(f"job {index} (id {job_id!r}): payload cannot be serialized: it is nested too deeply "
                             f"({exc})") from exc
        if not job_id.isascii():
            try:
                job_id.encode()
            except UnicodeEncodeError as exc:
                raise ValueError(f"job {index}: id {job_id!r} is not valid UTF-8 text: {exc.reason}") from None
        group = normalize_group(job["group"], index) if "group" in job else None
        after = normalize_after(job["after"], index) if "after" in job else ()
        tags = normalize_tags(job["tags"], index) if "tags" in job else ()
        prepared.append(PreparedJob(job_id, perform_in, payload, score, group, after, tags))
    return prepared
