"""Query parameters of the enqueued and morgue listings, shared by the pages and the API.

Paging is by cursor (the score and id of a page's first or last row), so the
thousandth page costs what the first one does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import BadInput as BadInput
from ..options import boolean, integer
from ..store.queries import MAX_LIMIT, Cursor, Page
from ..store.search import Content, Continuation, Found
from .dates import from_iso

TIME_ORDERS = frozenset({"perform_in", "updated_at"})

# Rows a page of the JSON API holds when the request does not say.
API_PAGE_SIZE = 100
# The content filters a listing takes, by parameter name.
CONTENT_FIELDS = ("error_class", "error", "payload")
# The longest id the search (the header's box, api/v1/search) looks for: an id may be any text, a search is no upload.
MAX_SEARCHED_ID = 10_000


@dataclass(frozen=True)
class Listing:
    order_by: str
    desc: bool
    min: str
    max: str
    limit: int
    after: Cursor | None = None
    before: Cursor | None = None
    error_class: str = ""
    error: str = ""
    payload: str = ""
    # Whether the content filters compare letters as they are; by default they ignore case.
    match_case: bool = False
    # Where a content search goes on (a Continuation's text); a content listing pages forwards only.
    scan: str = ""
    # A tag filter (docs/tags.md): the area's ids that carry it, read from the tag index, shard by shard and by
    # id in each; ``tag_after`` is where its next page goes on (a tag page's ``next``).
    tag: str = ""
    tag_after: str = ""

    @property
    def content(self) -> Content:
        return Content(self.error_class, self.error, self.payload, self.match_case)

    @property
    def bounded(self) -> bool:
        """Whether the listing filters at all (bounds, content or a tag): its bulk buttons say "matching", not "all"."""
        return bool(self.min or self.max or self.content or self.tag)

    def args(self, **changes: Any) -> dict[str, str]:
        """URL query arguments of this listing (with changes), leaving out empty ones."""
        listing = replace(self, **changes)
        out = {"order_by": listing.order_by, "desc": "1" if listing.desc else "0", "limit": str(listing.limit)}
        for name in ("min", "max"):
            if getattr(listing, name):
                out[name] = getattr(listing, name)
        if listing.after is not None:
            out["after"] = listing.after.encode()
        if listing.before is not None:
            out["before"] = listing.before.encode()
        for name in (*CONTENT_FIELDS, "scan", "tag", "tag_after"):
            if getattr(listing, name):
                out[name] = getattr(listing, name)
        if listing.match_case and listing.content:
            out["match_case"] = "1"
        return out

    def first_page(self) -> Listing:
        return replace(self, after=None, before=None, scan="", tag_after="")


def parse(args: Mapping[str, str], orders: tuple[str, ...], *, default_order: str, default_limit: int,
          default_desc: bool = False, blank_is_absent: bool = True) -> Listing:
    """Raises BadInput saying which parameter is wrong. ``default_desc``: the direction of ``default_order`` when
    desc is not given; another order without desc is ascending. ``blank_is_absent``: an empty content filter
    is no filter (a form's empty field), else it is refused (an API caller asked for nothing by mistake)."""
    order_by = args.get("order_by") or default_order
    if order_by not in orders:
        raise BadInput(f"order_by must be one of {', '.join(orders)}, got {order_by!r}")
    desc_text = args.get("desc") or ("1" if default_desc and order_by == default_order else "0")
    try:
        desc = boolean(desc_text)
    except ValueError:
        raise BadInput(f"desc must be 0 or 1, got {desc_text!r}") from None
    limit_text = args.get("limit") or str(default_limit)
    try:
        limit = integer(limit_text)
    except ValueError:
        raise BadInput(f"limit must be an integer, got {limit_text[:100]!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be in 1..{MAX_LIMIT}, got {limit}")
    after, before = _cursor(args, "after"), _cursor(args, "before")
    if after and before:
        raise BadInput("give either after or before, not both")
    content = content_filter(args, blank_is_absent=blank_is_absent)
    scan = args.get("scan") or ""
    if scan:
        if not content:
            raise BadInput("scan continues a content search: give it with error_class, error or payload")
        try:
            Continuation.decode(scan)
        except ValueError as exc:
            raise BadInput(f"scan: {exc}") from None
    if content and (after or before):
        raise BadInput("a content search pages with scan (the continuation it answered), not after or before")
    tag, tag_after = tag_filter(args)
    if tag and (content or after or before or args.get("min", "").strip() or args.get("max", "").strip()):
        raise BadInput("a tag filter stands alone: give it without min, max, after, before or a content filter")
    return Listing(
        order_by=order_by,
        desc=desc,
        min=bound(args.get("min", ""), order_by, "min"),
        max=bound(args.get("max", ""), order_by, "max"),
        limit=limit,
        after=after,
        before=before,
        error_class=content.error_class,
        error=content.error,
        payload=content.payload,
        match_case=content.match_case,
        scan=scan,
        tag=tag,
        tag_after=tag_after,
    )


def tag_filter(args: Mapping[str, Any]) -> tuple[str, str]:
    """A request's tag filter and where its page goes on (``tag``, ``tag_after``), checked: BadInput says why."""
    from ..store.tags import check_tag

    tag, after = args.get("tag") or "", args.get("tag_after") or ""
    if after and not tag:
        raise BadInput("tag_after goes on with a tag filter: give it with tag")
    if tag:
        try:
            check_tag(tag)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    return tag, after


def searched_id(text: str) -> str:
    """An id to find in every worker (``Console.find``), as typed: BadInput past MAX_SEARCHED_ID characters."""
    if len(text) > MAX_SEARCHED_ID:
        raise BadInput(f"id: at most {MAX_SEARCHED_ID} characters")
    return text


def content_filter(args: Mapping[str, Any], *, blank_is_absent: bool = True) -> Content:
    """The content filters of a request (error_class, error, payload, and match_case: 1 or true to compare
    letters as they are, else case is ignored), checked: BadInput names a bad one."""
    values: dict[str, Any] = {"match_case": match_case(args.get("match_case"))}
    for name in CONTENT_FIELDS:
        value = args.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadInput(f"{name} must be text, got {value!r:.100}")
        if value == "" and not blank_is_absent:
            raise BadInput(f"{name} must not be empty: leave it out to filter nothing")
        values[name] = value
    try:
        return Content(**values)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def match_case(value: Any) -> bool:
    """A request's ``match_case``: absent, empty, 0 or false ignore case; 1 or true match it (a form's checkbox
    sends 1, a JSON body true)."""
    if value is None or value == "" or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, str):
        try:
            return boolean(value)
        except ValueError:
            pass
    raise BadInput(f"match_case must be 0 or 1 (true or false), got {value!r:.100}")


# Lowkiq's API and web client, like Redis, write "no bound" as an infinity: -inf below, +inf (or inf) above.
UNBOUNDED = {"min": frozenset({"-inf"}), "max": frozenset({"+inf", "inf"})}


def bound(text: str, order_by: str, name: str) -> str:
    """A min/max filter: an id as typed, a number, or for times also a local date and time; ``""``
    (no bound) for an empty value and for Lowkiq's infinities (``min=-inf``, ``max=+inf`` or ``inf``,
    in any case and for every order, ids included)."""
    text = text.strip()
    if text.lower() in UNBOUNDED[name]:
        return ""
    if not text or order_by == "id":
        return text  # an id compares byte by byte: "inf" as a min is an id like any other
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if math.isnan(number):
            raise BadInput(f"{name} must be a number, got {text!r}")
        if math.isinf(number):
            if (number < 0) == (name == "min"):
                return ""  # -infinity, 1e999...: a spelling of no bound float() reads
            # An infinity on the wrong side would match nothing (Redis's reading): say so rather than
            # show an empty listing that looks like an empty queue.
            other = "+inf" if name == "max" else "-inf"
            raise BadInput(f"{name} {text!r} matches nothing; for no {'upper' if name == 'max' else 'lower'} "
                           f"bound give {name}={other} or leave it empty")
        return text
    if order_by in TIME_ORDERS:
        try:
            return repr(from_iso(text).timestamp())
        except ValueError:
            raise BadInput(f"{name} must be a unix time or a date like 2024-05-01 12:00, got {text!r}") from None
    raise BadInput(f"{name} must be a number when ordering by {order_by}, got {text!r}")


def _cursor(args: Mapping[str, str], name: str) -> Cursor | None:
    token = args.get(name)
    if not token:
        return None
    try:
        cursor = Cursor.decode(token)
    except ValueError as exc:
        raise BadInput(f"{name}: {exc}") from None
    if not math.isfinite(cursor.score):
        raise BadInput(f"{name}: the cursor's score must be a finite number, got {token[:100]!r}")
    return cursor


@dataclass(frozen=True)
class Shown:
    """A page ready to show: its rows and the listings of the pages around it."""

    rows: list[Any]
    listing: Listing
    next: Listing | None
    previous: Listing | None
    # Every row within the listing's filter, when the query counted them.
    matching: int | None = None
    # A content search's progress: the ids it examined so far, of how many the area holds.
    examined: int | None = None
    total: int | None = None


def search(query: Callable[..., tuple[list[Any], Found]], listing: Listing) -> Shown:
    """A page of a content search (``Console.search`` of one view and area): the next page, if any, goes on
    where this one stopped."""
    try:
        rows, found = query(listing.content, limit=listing.limit,
                            after=Continuation.decode(listing.scan) if listing.scan else None,
                            order_by=listing.order_by, min=listing.min or None, max=listing.max or None)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    following = replace(listing, scan=found.next.encode()) if found.next else None
    return Shown(rows=rows, listing=listing, next=following, previous=None, examined=found.examined,
                 total=found.total)


def tagged(query: Callable[..., tuple[list[Any], str | None]], listing: Listing) -> Shown:
    """A page of a tag filter (``Console.tagged_rows`` of one view and area): the next page goes on where this
    one stopped; a page may come short of the limit with more to follow."""
    rows, following = query(listing.tag, limit=listing.limit, after=listing.tag_after or None)
    return Shown(rows=rows, listing=listing, next=replace(listing, tag_after=following) if following else None,
                 previous=None)


def fetch(query: Callable[..., Page[Any]], listing: Listing) -> Shown:
    page = _query(query, listing)
    if listing.before is not None and not page.has_more and len(page.rows) < listing.limit:
        # Paging back reached the start with a short page: show a full first page instead.
        listing = listing.first_page()
        page = _query(query, listing)
    backwards = listing.before is not None
    has_next = True if backwards else page.has_more
    has_previous = page.has_more if backwards else listing.after is not None
    return Shown(
        rows=page.rows,
        listing=listing,
        next=replace(listing, after=page.last, before=None) if has_next and page.last else None,
        previous=replace(listing, before=page.first, after=None) if has_previous and page.first else None,
        matching=page.matching,
    )


def _query(query: Callable[..., Page[Any]], listing: Listing) -> Page[Any]:
    try:
        return _run(query, listing)
    except ValueError as exc:  # the queue's own checks of what the caller sent
        raise BadInput(str(exc)) from None


def _run(query: Callable[..., Page[Any]], listing: Listing) -> Page[Any]:
    return query(
        listing.order_by,
        desc=listing.desc,
        min=listing.min or None,
        max=listing.max or None,
        limit=listing.limit,
        after=listing.after,
        before=listing.before,
    )
