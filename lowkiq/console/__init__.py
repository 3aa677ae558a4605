"""What the console reads and acts on: one Redis client, the known workers, the serializers.

A console finds its workers in one of two ways:

- from a configured lowkiq (``lowkiq.configure(workers=[...])`` in the host
  app, or in the file named by ``LOWKIQ_APP``): the workers' classes are the
  truth, and their payload serializers are used;
- from the registry that servers and clients keep in Redis, when no app code
  is at hand (the standalone console): payloads are read as JSON, the default.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from .. import app_file, connection
from ..config import redis_url_from

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import BadInput
from ..errors import UnknownWorker as UnknownWorker
from ..runtime import Runtime
from ..serializers import load_error as default_load_error
from ..serializers import load_json
from ..store import audit, registry
from ..store import search as content_search
from ..store.actions import Actions, Filter
from ..store.confirmations import Confirmations, Pending
from ..store.keys import QueueKeys
from ..store.membership import Member
from ..store.metrics import CONSOLE_SHARD_BUDGET, FULL, STATS, MetricsReader, QueueMetrics
from ..store.queries import ENQUEUED_ORDERS, MAX_LIMIT, MORGUE_ORDERS, ROW_BYTES, ROW_ERROR_BYTES, Queries
from ..store.registry import BrokenEntry, WorkerInfo
from ..store.search import Bounds, Content, Continuation, Search
from ..store.tags import TaggedPage, Tags
from ..transport import Transport
from .operations import MATCHING
from .schedules import ScheduleConsole, from_app
from .waiting import Dependent, WaitingVersion, dependents, waiting_count, waiting_versions
from .waiting import WaitingOn as WaitingOn


class AreaOrder(NamedTuple):
    """An area's orders, the one used when none is asked for, and its direction."""

    orders: tuple[str, ...]
    default: str
    desc: bool


# Registry lookups are cached this long: the stats API is polled often and the
# set of workers changes only on deploys.
REGISTRY_TTL = 5.0
# Ids per requeue/delete script of a "matching" action: each script stays short, however many match.
MATCHING_CHUNK = 1000
# Ids per script of a "matching" action on a content filter: each id's error and payloads are read again to
# check that it still matches, so a chunk holds fewer ids to stay as short.
CONTENT_CHUNK = 250
# What a "matching" action may do, by area and verb: the Actions method it runs on each chunk (read from
# the one table of operator actions).
MATCHING_VERBS = {area: {op.verb: op.method for op in MATCHING if op.area == area} for area in ("morgue", "enqueued")}
# Each area's orders, the one a listing or filter of it uses when none is given, and that order's direction:
# the morgue opens newest first (what died last is what an operator looks for), the queue soonest due first.
AREA_ORDERS = {"morgue": AreaOrder(MORGUE_ORDERS, "updated_at", desc=True),
               "enqueued": AreaOrder(ENQUEUED_ORDERS, "perform_in", desc=False)}
CONSOLE_POOL_SIZE = 10
# The workers a console knows: the usable ones, and registry entries it cannot use.
Known = tuple[list[WorkerInfo], list[BrokenEntry]]


class BrokenWorker(UnknownWorker):
    """A worker whose registry entry cannot be used: its pages say why instead of showing it."""

    def __init__(self, entry: BrokenEntry) -> None:
        super().__init__(entry.name, f"worker {entry.name!r} has a broken registry entry: {entry.problem}")


@dataclass(frozen=True)
class WorkerView:
    """A worker as the console knows it, with its keys built once."""

    info: WorkerInfo
    keys: QueueKeys

    @property
    def name(self) -> str:
        return self.info.name


@dataclass(frozen=True)
class Counted:
    """What a confirmed "matching" action did: how many jobs its dry run counted, how many it touched.

    The difference is the jobs that no longer matched when it ran: performed, moved or
    deleted since, or changed so that the filter no longer holds them."""

    counted: int
    touched: int

    @property
    def skipped(self) -> int:
        return self.counted - self.touched


@dataclass(frozen=True)
class Found:
    """An id found in a worker: ``where`` is "queued", "busy" or "dead"; ``job`` its Job or MorgueJob."""

    view: WorkerView
    where: str
    job: Any


class Console:
    def __init__(
        self,
        client: Transport,
        workers: Callable[[], Known],
        *,
        load_payload: Callable[[bytes], Any] = load_json,
        load_error: Callable[[bytes], str] = default_load_error,
        clock: Callable[[], float] = time.time,
        source: str = "registry",
        redis_label: str = "",
    ) -> None:
        self.client = client
        self._workers = workers
        self.load_payload = load_payload
        self.load_error = tolerant_error(load_error)
        self.clock = clock
        self.source = source
        self.redis_label = redis_label  # which Redis, for people: never a password
        # Every read of many workers stops at a budget of shards: a page costs a bounded number of commands.
        self._reader = MetricsReader(client, shard_budget=CONSOLE_SHARD_BUDGET)
        self._schedule_board: ScheduleConsole | None = None

    @classmethod
    def from_runtime(cls, runtime: Runtime, *, redis_timeout: float, redis_url: str | None = None) -> Console:
        """The console of a configured lowkiq; the registry only if it has no workers.

        Its own connections, whose replies may take at most ``redis_timeout`` seconds:
        a page answers 503 within that when Redis hangs, whatever the app's pool_timeout.
        ``redis_url``, when given, is watched instead of the runtime's Redis.
        """
        configured = [registry.info_of(w) for w in runtime.settings.workers]
        url = redis_url or runtime.redis_url
        client = Transport(url, pool_size=CONSOLE_POOL_SIZE, timeout=redis_timeout)
        workers: Callable[[], Known] = (lambda: (configured, [])) if configured else cached_registry(client)
        s = runtime.settings
        return cls(
            client,
            workers,
            load_payload=s.load_payload,
            load_error=s.load_error,
            clock=runtime.clock,
            source="app" if configured else "registry",
            redis_label=connection.describe(redis_url or s.redis_url, connection.embedded_dir(s.workers)),
        )

    @classmethod
    def from_url(cls, url: str, *, redis_timeout: float, redis_label: str = "") -> Console:
        client = Transport(url, pool_size=CONSOLE_POOL_SIZE, timeout=redis_timeout)
        return cls(client, cached_registry(client), redis_label=redis_label or connection.describe(url))

    def schedule_board(self) -> ScheduleConsole:
        """The schedules the dashboard watches: the app's, else the registry's, read again at most every
        REGISTRY_TTL seconds (the dashboard polls)."""
        if self._schedule_board is None:
            self._schedule_board = from_app(self.client, registry_ttl=REGISTRY_TTL)
        return self._schedule_board

    # ---- workers --------------------------------------------------------

    def workers(self) -> list[WorkerView]:
        return [WorkerView(info, QueueKeys(info.queue_name, info.shards_count)) for info in self._workers()[0]]

    def broken(self) -> list[BrokenEntry]:
        """Registry entries that cannot be used, each with its problem."""
        return self._workers()[1]

    def worker(self, name: str) -> WorkerView:
        for view in self.workers():
            if view.name == name:
                return view
        for entry in self.broken():
            if entry.name == name:
                raise BrokenWorker(entry)
        raise UnknownWorker(name)

    def queries(self, view: WorkerView) -> Queries:
        return Queries(self.client, view.keys, load_payload=self.load_payload, load_error=self.load_error)

    def actions(self, view: WorkerView, actor: str = "") -> Actions:
        """The worker's actions, each touched id's history naming ``actor`` as who acted."""
        return Actions(self.client, view.keys, clock=self.clock, actor=actor)

    def count_matching(self, view: WorkerView, area: str, verb: str, order_by: str, *, min: Any = None,
                       max: Any = None, content: Content | None = None, tag: str = "") -> Pending:
        """The dry run of a "matching" action (``MATCHING_VERBS[area][verb]``): the jobs of ``area``
        ("morgue" or "enqueued") within ``min``..``max`` of ``order_by`` (all without bounds), and whose
        ``content`` matches when given, are counted, and their ids kept under a token that confirms acting
        on exactly those (``act_on_counted``). A content filter is a search of every shard in short steps;
        a ``tag`` (alone: no bounds, no content) counts the area's ids that carry it, from the tag index."""
        _matching_method(area, verb)
        scope = _scope(view, area, verb, order_by, min, max, content, tag)
        if tag:
            return Confirmations(self.client).create(scope, self.tagged_ids(view, area, tag))
        if content:
            return Confirmations(self.client).create(scope, self.matching_ids(view, area, content, order_by,
                                                                              min=min, max=max))
        q = self.queries(view)
        ids_of = q.morgue_ids if area == "morgue" else q.enqueued_ids
        chunks = ids_of(order_by, min=min, max=max, chunk=MATCHING_CHUNK)
        return Confirmations(self.client).create(scope, chunks)

    def act_on_counted(self, view: WorkerView, area: str, verb: str, order_by: str, token: str, *, min: Any = None,
                       max: Any = None, content: Content | None = None, tag: str = "", who: str, source: str,
                       action: str, scope: str) -> Counted:
        """Act on the jobs the dry run of ``token`` counted, and of those on the ones that still match the
        filter (content included): a job that came to match after the count is never touched. In chunks of
        MATCHING_CHUNK ids (CONTENT_CHUNK with a content filter), each its own short script, audited as
        ``act_on_all`` is (``scope``: the filter as people read it): an entry once the token is taken, before
        the first chunk, and one when it ends or is cut off. Raises ConfirmationRefused (touching nothing,
        recording nothing) for a token that was used, has expired, was never issued or counted another action."""
        act = getattr(self.actions(view, who), _matching_method(area, verb))
        confirmed = _scope(view, area, verb, order_by, min, max, content, tag)
        counted, chunks = Confirmations(self.client).take(token, confirmed)
        within = Filter(order_by, min, max, content=content or None, area=area, tag=tag)
        step = CONTENT_CHUNK if content else MATCHING_CHUNK

        def run(progress: Callable[[int], None]) -> int:
            touched = 0
            for ids in chunks:
                for i in range(0, len(ids), step):
                    touched += act(ids[i:i + step], within=within)
                    progress(touched)
            return touched

        touched = self._audited(view, run, who=who, source=source, action=action, scope=scope)
        return Counted(counted, touched)

    def matching_ids(self, view: WorkerView, area: str, content: Content, order_by: str = "id", *, min: Any = None,
                     max: Any = None) -> Iterator[list[str]]:
        """Every id of ``area`` whose content matches (and within min..max of order_by), a search step's worth at a
        time: shard by shard, by id in each, as a content-filtered listing shows them."""
        return Search(self.client, view.keys).ids(area, content, bounds=_bounds(order_by, min, max))

    def search(self, view: WorkerView, area: str, content: Content, *, limit: int, after: Continuation | None = None,
               order_by: str = "id", min: Any = None, max: Any = None) -> tuple[list[Any], content_search.Found]:
        """A page of the jobs of ``area`` whose content matches (and within min..max of order_by): the rows
        found, and the search's page (how many ids it examined, where it goes on). A page examines a bounded
        number of ids: it may hold fewer rows than ``limit``, and more may follow."""
        found = Search(self.client, view.keys).page(area, content, limit=limit, after=after,
                                                    bounds=_bounds(order_by, min, max))
        q = self.queries(view)
        fetch = q.morgue_jobs if area == "morgue" else q.jobs
        return list(fetch(found.ids, cap=ROW_BYTES, error_cap=ROW_ERROR_BYTES)), found

    def act_on_all(self, view: WorkerView, method: str, *, who: str, source: str, action: str) -> int:
        """A whole-area action of ``Actions`` (``morgue_requeue_all``, ``kill_failed``, ...), in chunks, with
        an audit entry when it starts and one when it ends: also when it is cut off (an error, the
        process stopping), with how many jobs it had touched by then. Each chunk is atomic: what an
        interrupted action did not reach is untouched, and running it again goes on from there."""
        run = getattr(self.actions(view, who), method)
        return self._audited(view, lambda progress: int(run(progress=progress)), who=who, source=source,
                             action=action, scope="all")

    def _audited(self, view: WorkerView, run: Callable[[Callable[[int], None]], int], *, who: str, source: str,
                 action: str, scope: str) -> int:
        """``run(progress)``, an action in chunks that calls ``progress`` with the jobs touched so far, between an
        audit entry "<scope>: started" and one that says what it did, or "<scope>: cut off after N jobs" when it
        raises (an error, KeyboardInterrupt). A process killed outright leaves the start entry alone: the log
        still says the action began and never said it ended."""

        def record(count: int, note: str) -> None:
            audit.record(self.client, who=who, source=source, action=action, worker=view.name, count=count,
                         scope=audit.with_note(scope, note))

        record(0, ": started")
        done = 0

        def progress(touched: int) -> None:
            nonlocal done
            done = touched

        try:
            count = run(progress)
        except BaseException as exc:
            # When Redis itself is what failed, the start entry stays and the error goes up.
            with contextlib.suppress(Exception):
                record(done, f": cut off after {done:,} jobs ({type(exc).__name__})")
            raise
        record(count, "")
        return count

    def find(self, job_id: str, views: list[WorkerView] | None = None) -> list[Found]:
        """Where an id is, in every worker (or in ``views``): queued, busy (in processing) and dead, each a
        record. Three reads of one shard per worker (see finding.py for a search bounded per request)."""
        found = []
        for view in self.workers() if views is None else views:
            q = self.queries(view)
            for where, job in (("queued", q.job(job_id)), ("busy", q.busy_job(job_id)),
                               ("dead", q.morgue_job(job_id))):
                if job is not None:
                    found.append(Found(view, where, job))
        return found

    def waiting(self, view: WorkerView, job_id: str) -> list[WaitingVersion]:
        """The id's versions waiting for their dependencies (``after``), each with where those are now."""
        return waiting_versions(self, view, job_id)

    def dependents(self, view: WorkerView, job_id: str) -> list[Dependent]:
        """The versions of other ids waiting for this id's versions (``after``), until they are performed."""
        return dependents(self, view, job_id)

    def waiting_count(self, view: WorkerView) -> int:
        """How many of the worker's ids have a version waiting for dependencies."""
        return waiting_count(self, view)

    # ---- tags (docs/tags.md) ----------------------------------------------

    def tagged(self, view: WorkerView, tag: str, *, limit: int, after: str | None = None) -> TaggedPage:
        """A page of the ids of ``view`` tagged ``tag`` (each once across the pages; ``after`` is a previous
        page's ``next``), read from the shards' tag indexes: it costs the tag's ids, not the queue's size.
        Raises BadInput for a tag no job may carry, a bad cursor or a limit outside 1..MAX_LIMIT."""
        if not 1 <= limit <= MAX_LIMIT:
            raise BadInput(f"limit must be in 1..{MAX_LIMIT}, got {limit}")
        try:
            return Tags(self.client, view.keys).page(tag, limit=limit, after=after)
        except ValueError as exc:
            raise BadInput(str(exc)) from None

    def tagged_rows(self, view: WorkerView, area: str, tag: str, *, limit: int,
                    after: str | None = None) -> tuple[list[Any], str | None]:
        """A page of the tab ``area`` ("enqueued" or "morgue") filtered by ``tag``: the area's jobs among a page of
        the tag's ids (each job cut to a row's bytes), and the cursor of the next page (None after the last)."""
        page = self.tagged(view, tag, limit=limit, after=after)
        ids = [job.id for job in page.jobs if (job.dead if area == "morgue" else job.queued)]
        q = self.queries(view)
        fetch = q.morgue_jobs if area == "morgue" else q.jobs
        return [job for job in fetch(ids, cap=ROW_BYTES, error_cap=ROW_ERROR_BYTES) if job is not None], page.next

    def tagged_ids(self, view: WorkerView, area: str, tag: str) -> Iterator[list[str]]:
        """Every id of ``area`` that carries ``tag``, a page of the tag index at a time."""
        after = None
        while True:
            page = self.tagged(view, tag, limit=MATCHING_CHUNK, after=after)
            yield [job.id for job in page.jobs if (job.dead if area == "morgue" else job.queued)]
            if page.next is None:
                return
            after = page.next

    def tags_of(self, view: WorkerView, job_id: str) -> tuple[str, ...]:
        """The tags of an id of ``view``: the union of its versions' while any copy of it is left."""
        return Tags(self.client, view.keys).of(job_id)

    # ---- numbers --------------------------------------------------------

    def metrics(self, views: list[WorkerView] | None = None, *, full: bool = True,
                groups: bool = False) -> list[tuple[WorkerView, QueueMetrics]]:
        """Every shard of the given workers (all by default) in one round trip.

        ``full=False`` reads only what api/v1/stats shows (length, dead, lag). ``groups``: each worker's
        biggest groups too (store/group_metrics.py: one more round trip when a shard holds groups).
        """
        views = self.workers() if views is None else views
        measured, _ = self._reader.read([v.keys for v in views], self.clock(), kind=FULL if full else STATS,
                                        groups=groups)
        return list(zip(views, measured))

    def dashboard(self) -> tuple[list[tuple[WorkerView, QueueMetrics]], dict[str, Any], list[Member]]:
        """Every shard's numbers, Redis INFO and the live servers, in one round trip; each worker's biggest
        groups too, for the "needs attention" band (one more round trip when a shard holds groups)."""
        views = self.workers()
        measured, info, members = self._reader.read_with_members([v.keys for v in views], self.clock(),
                                                                 groups=True)
        return list(zip(views, measured)), _redis_summary(info or {}), members

    def metrics_and_members(self, now: float, *,
                            groups: bool = False) -> tuple[list[tuple[WorkerView, QueueMetrics]], list[Member]]:
        """Every shard's numbers (lag as of ``now``) and the live servers, in one round trip (groups as in
        ``metrics``).

        The dashboard's read without Redis INFO, which visits every node: a scraper polls this.
        """
        views = self.workers()
        measured, _, members = self._reader.read_with_members([v.keys for v in views], now, with_info=False,
                                                              groups=groups)
        return list(zip(views, measured)), members


def _matching_method(area: str, verb: str) -> str:
    try:
        return MATCHING_VERBS[area][verb]
    except KeyError:
        raise ValueError(f"no {verb!r} action on {area!r} jobs; "
                         f"expected one of {', '.join(MATCHING_VERBS.get(area, {}))}") from None


def _scope(view: WorkerView, area: str, verb: str, order_by: str, min: Any, max: Any,
           content: Content | None = None, tag: str = "") -> dict[str, str]:
    """What a confirmation token confirms, field by field (the confirmed request must say the same)."""
    content = content or Content()
    return {"worker": view.name, "area": area, "action": verb, "order_by": order_by,
            "min": "" if min is None else str(min), "max": "" if max is None else str(max),
            "error_class": content.error_class, "error": content.error, "payload": content.payload,
            "match_case": content.case_arg(), "tag": tag}


def _bounds(order_by: str, min: Any, max: Any) -> Bounds:
    """A listing's min..max as the search checks them: the order's index, bounds as the scripts read them."""
    bounds = Filter(order_by, min, max).args()
    return Bounds(order_by, bounds[2], bounds[3])


def _redis_summary(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": info.get("redis_version"),
        "uptime_in_seconds": info.get("uptime_in_seconds"),
        "connected_clients": info.get("connected_clients"),
        "used_memory": info.get("used_memory"),
        "used_memory_human": info.get("used_memory_human"),
        "used_memory_peak": info.get("used_memory_peak"),
        "used_memory_peak_human": info.get("used_memory_peak_human"),
        "maxmemory_policy": info.get("maxmemory_policy"),
        "evicting": info.get("evicting", {}),
    }


def cached_registry(client: Transport | redis.Redis, ttl: float = REGISTRY_TTL) -> Callable[[], Known]:
    """registry.read(client), read again at most every ``ttl`` seconds."""
    lock = threading.Lock()
    cache: dict[str, Any] = {"at": float("-inf"), "known": ([], [])}

    def workers() -> Known:
        now = time.monotonic()
        if now - cache["at"] >= ttl:
            with lock:
                if now - cache["at"] >= ttl:
                    cache["known"] = registry.read(client)
                    cache["at"] = time.monotonic()
        return cache["known"]  # type: ignore[no-any-return]

    return workers


def tolerant_error(load_error: Callable[[bytes], str]) -> Callable[[bytes], str]:
    """``load_error`` that shows an error text it cannot read, instead of failing the whole page."""

    def load(raw: bytes) -> str:
        try:
            return load_error(raw)
        except Exception as exc:  # a custom loader, or bytes another writer stored
            return f"<undecodable error ({type(exc).__name__}: {exc}): {raw[:200]!r}>"

    return load


def load_app(path: str) -> Runtime:
    """Run the app file that calls ``lowkiq.configure`` (as ``lowkiq -r`` does) and return its runtime."""
    try:
        return app_file.load(path, as_main_app=False)
    except app_file.AppFileError as exc:
        raise RuntimeError(f"LOWKIQ_APP={path!r}: {exc}") from exc


def standalone_console(environ: dict[str, str], *, redis_timeout: float, redis_url: str | None = None) -> Console:
    """The console of ``create_app()``: LOWKIQ_APP, else the registry at the configured Redis.

    ``redis_url`` is a URL given on a command line: it wins over the app's ``configure()``
    and the environment, as ``lowkiq -r app.py --redis-url URL`` does.
    """
    app_file = environ.get("LOWKIQ_APP")
    if app_file:
        return Console.from_runtime(load_app(app_file), redis_timeout=redis_timeout, redis_url=redis_url)
    url = redis_url or redis_url_from(None, environ)
    if url:
        return Console.from_url(url, redis_timeout=redis_timeout)
    return Console.from_url(connection.embedded_url(), redis_timeout=redis_timeout, redis_label=connection.describe(None))
