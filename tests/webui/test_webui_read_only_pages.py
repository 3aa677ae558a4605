"""A read-only console shows no action a viewer cannot take, on any page.

The test crawls every page a viewer can reach (links, and the parts htmx loads) of a console whose Redis holds
something of everything an action button is drawn for: queued jobs (one scheduled later), dead jobs, a job in
processing, a paused queue, a live server, a schedule, audit entries and, for a console reading the registry, a
stale worker. Every page the console serves must be among those crawled; none may hold a form that posts, a
button that submits anything but a search or a filter, or a CSRF token. The same crawl of a writable console
finds the forms, so the check can tell."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from flask import Flask
from queue_support import held_lease
from test_webui_openapi import beat
from webui_support import WORKERS, MailerWorker, OrdersWorker, host_app, make_dead

import lowkiq
from lowkiq.store import pausing, schedules
from lowkiq.store.keys import registry_hash
from lowkiq.webui import create_app

pytestmark = pytest.mark.slow

NIGHTLY = lowkiq.Schedule("nightly", OrdersWorker, cron="0 3 * * *")
# Not pages: the JSON API, static files, Prometheus' text and the CSV exports.
NOT_PAGES = ("/api/", "/lowkiq-static/", "/metrics", "/export", "/healthz")
# Client-side controls (the live refresh's pause, the time zone switch): they change the page, never the data.
HTMX_WRITES = ("hx-post", "hx-put", "hx-patch", "hx-delete")


class PageReader(HTMLParser):
    """What in a page acts (``found``): forms that do not GET, submit buttons outside a GET form, form
    overrides, htmx writes, confirmations and CSRF tokens; and where a viewer goes from it (``links``)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[str] = []  # the methods of the forms the parser is in
        self.found: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: (value or "") for name, value in attrs}
        self.links += [a[name] for name in ("href", "hx-get") if a.get(name)]
        if tag == "form":
            method = a.get("method", "get").lower()
            self.forms.append(method)
            if method != "get":
                self.found.append(f"<form method={method} action={a.get('action')}>")
            elif a.get("action"):
                self.links.append(a["action"])
        kind = a.get("type", "submit" if tag == "button" else "").lower()
        if tag in ("button", "input") and kind in ("submit", "image") and self.forms[-1:] != ["get"]:
            self.found.append(f"<{tag} type={kind}> outside a GET form")
        if a.get("name") == "csrf_token":
            self.found.append("a CSRF token")
        self.found += [f"<{tag} {name}>" for name in a if name in ("formaction", "formmethod", "data-confirm",
                                                                      *HTMX_WRITES)]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.forms:
            self.forms.pop()


def read(page: str) -> PageReader:
    reader = PageReader()
    reader.feed(page)
    reader.close()
    return reader


def actions_in(page: str) -> list[str]:
    return read(page).found


def crawl(app: Flask, seeds: Iterable[str], limit: int = 400) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """Every page reachable from ``seeds`` by links (and the parts htmx loads): by URL, the endpoint that drew
    it and its text; and every endpoint answered, redirects included. Paging, sorting and filter links are
    followed too, at most ``limit`` URLs."""
    client = app.test_client()
    adapter = app.url_map.bind("localhost")
    pages: dict[str, tuple[str, str]] = {}
    endpoints: set[str] = set()
    todo, seen = list(seeds), set(seeds)
    while todo and len(pages) < limit:
        target = todo.pop(0)
        reply = client.get(target, follow_redirects=True)
        endpoints.add(adapter.match(urlsplit(target).path, method="GET")[0])
        drawn_by = adapter.match(reply.request.path, method="GET")[0]
        endpoints.add(drawn_by)
        assert reply.status_code in (200, 404), (target, reply.status_code)
        if reply.mimetype != "text/html":
            continue
        text = reply.get_data(as_text=True)
        pages[target] = (drawn_by, text)
        for link in read(text).links:  # attribute values come unescaped
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path.startswith("/") or any(p in parts.path for p in NOT_PAGES):
                continue
            if link not in seen:
                seen.add(link)
                todo.append(link)
    return pages, endpoints


def page_endpoints(app: Flask) -> set[str]:
    """The console's GET endpoints that answer a page or a part of one."""
    return {rule.endpoint for rule in app.url_map.iter_rules()
            if rule.endpoint.startswith("lowkiq.") and "GET" in (rule.methods or ())
            and not any(p in rule.rule for p in NOT_PAGES)}


def seed(runtime, r) -> None:
    """Something of everything an action is drawn for."""
    make_dead(runtime, OrdersWorker, [{"id": "dead-1"}, {"id": "dead-2"}], error=b"boom")
    OrdersWorker.perform_async([{"id": "busy-1"}])
    q = runtime.queue(OrdersWorker)
    assert q.ack_and_take(None, (held_lease(q, q.shard_of("busy-1")), 100)).jobs  # in processing
    OrdersWorker.perform_async([{"id": "later-1", "perform_in": runtime.clock() + 3600}, {"id": "due-1"}])
    MailerWorker.perform_async([{"id": "mail-1"}])
    pausing.pause(r, MailerWorker.queue_name, worker="MailerWorker", who="ops", source="cli")  # Resume, when writable
    beat(r, "server-a", {"OrdersWorker": [0, 1]})
    schedules.register(r, [NIGHTLY])  # what servers record, for a console reading the registry
    r.hset(registry_hash(), "Gone", json.dumps({"name": "Gone", "queue_name": "gone", "shards_count": 2,
                                                "max_retry_count": 25, "batch_size": 1,
                                                "registered_at": time.time() - 2 * 86400}))


def seeds(prefix: str) -> list[str]:
    """The dashboard, and what a typed URL reaches that no link does: a search, a filtered listing (its bulk
    buttons say "matching"), a content search, a worker's own address, a job's by its path, and an unknown
    worker's page."""
    p = prefix.rstrip("/")
    return [f"{p}/", f"{p}/workers/OrdersWorker", f"{p}/workers/OrdersWorker/jobs/later-1",
            f"{p}/search?id=later-1", f"{p}/search?id=dead-1", f"{p}/search?id=nowhere",
            f"{p}/workers/OrdersWorker/morgue?order_by=id&min=dead", f"{p}/workers/OrdersWorker/enqueued?error=boom",
            f"{p}/workers/OrdersWorker/enqueued?order_by=id&max=z", f"{p}/workers/Nope/enqueued"]


@pytest.fixture
def consoles(configure, redis_url, r):
    """Both kinds of console over the same data: mounted in the app (its workers and schedules), and standalone,
    reading the registry (where a stale worker has a Forget button)."""
    runtime = configure(workers=WORKERS, schedules=[NIGHTLY])
    seed(runtime, r)

    def make(readonly: bool) -> list[tuple[Flask, str]]:
        standalone = create_app(environ={"LOWKIQ_REDIS_URL": redis_url,
                                         **({"LOWKIQ_WEB_READONLY": "1"} if readonly else {})})
        return [(host_app(LOWKIQ_WEB_READONLY=readonly), "/lowkiq/"), (standalone, "/")]

    return make


def test_no_page_of_a_read_only_console_offers_an_action(consoles):
    for app, prefix in consoles(readonly=True):
        pages, endpoints = crawl(app, seeds(prefix))
        assert page_endpoints(app) - endpoints == set(), "pages the crawl did not reach"
        offered = {url: found for url, (_, page) in pages.items() if (found := actions_in(page))}
        assert offered == {}, prefix
        # The data was there to be acted on: the pages show it.
        shown = "".join(page for _, page in pages.values())
        for thing in ("nightly", "dead-1", "busy-1", "later-1", "server-a", "read-only"):
            assert thing in shown, (prefix, thing)
        if prefix == "/":
            assert "stale" in pages["/"][1]


def test_the_same_crawl_of_a_writable_console_finds_its_actions(consoles):
    """The check above can fail: every kind of action form is found on a writable console."""
    for app, prefix in consoles(readonly=False):
        pages, _ = crawl(app, seeds(prefix))
        offered = {endpoint for endpoint, page in pages.values() if actions_in(page)}
        expected = {"lowkiq.schedules_page", "lowkiq.enqueued", "lowkiq.morgue", "lowkiq.busy", "lowkiq.job",
                    "lowkiq.job_by_query", "lowkiq.worker_counts"}
        if prefix == "/":
            expected |= {"lowkiq.dashboard", "lowkiq.dashboard_live"}  # the stale worker's Forget
        assert expected <= offered, (prefix, expected - offered)
