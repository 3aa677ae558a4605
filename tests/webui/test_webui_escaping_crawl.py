"""Every page escapes what operators' data holds: a crawl of a console (mounted and standalone) whose Redis
holds a hostile id (queued, busy, dead, in the history and the hot ids), a hostile group name (in the groups
table and the dashboard's needs-attention band), and a hostile error, finds the markup only as text.

Schedule and worker names cannot hold markup: they are checked when configured and when read from the
registry (store/keys.py, validate_queue_name), so a hostile one never reaches a page."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
from queue_support import held_lease
from test_webui_read_only_pages import NIGHTLY, crawl, page_endpoints
from webui_support import WORKERS, MailerWorker, OrdersWorker, fail, host_app, make_dead

from lowkiq.store import schedules
from lowkiq.webui import create_app

pytestmark = pytest.mark.slow

XSS = '"><script>alert(1)</script>'
HOSTILE_GROUP = "<img src=x onerror=alert(2)>"


def seed(runtime, r) -> None:
    now = time.time()
    make_dead(runtime, OrdersWorker, [{"id": XSS, "payload": {"html": XSS}}], error=("RuntimeError: " + XSS).encode())
    OrdersWorker.perform_async([{"id": "q-" + XSS, "payload": XSS, "group": HOSTILE_GROUP, "perform_in": now - 900},
                                *({"id": f"calm-{g}", "payload": 1, "group": g, "perform_in": now - 2} for g in "BCD")])
    fail(runtime, OrdersWorker, ["calm-B"], error=XSS.encode())
    MailerWorker.perform_async([{"id": "busy-" + XSS, "payload": 1}])
    q = runtime.queue(MailerWorker)
    assert q.ack_and_take(None, (held_lease(q, q.shard_of("busy-" + XSS)), 10)).jobs
    schedules.register(r, [NIGHTLY])


def seeds(prefix: str) -> list[str]:
    p = prefix.rstrip("/")
    return [f"{p}/", f"{p}/schedules", f"{p}/workers/OrdersWorker", f"{p}/workers/OrdersWorker/jobs/{quote(XSS, safe='')}",
            f"{p}/workers/OrdersWorker/hot", f"{p}/workers/MailerWorker/hot",
            f"{p}/search?id={quote(XSS)}", f"{p}/workers/OrdersWorker/morgue?error=script",
            f"{p}/workers/OrdersWorker/job?id={quote(XSS)}", f"{p}/workers/OrdersWorker/job?id={quote('q-' + XSS)}",
            f"{p}/workers/MailerWorker/busy", f"{p}/workers/MailerWorker/job?id={quote('busy-' + XSS)}"]


def test_no_page_shows_hostile_ids_group_names_or_errors_as_markup(configure, redis_url, r):
    runtime = configure(workers=WORKERS, schedules=[NIGHTLY])
    runtime.clock = time.time  # the group's wait is Redis time
    seed(runtime, r)
    for app, prefix in ((host_app(), "/lowkiq/"), (create_app(environ={"LOWKIQ_REDIS_URL": redis_url}), "/")):
        pages, endpoints = crawl(app, seeds(prefix))
        assert page_endpoints(app) - endpoints == set(), "pages the crawl did not reach"
        raw = {url for url, (_, text) in pages.items() if XSS in text or HOSTILE_GROUP in text or "<script>" in text}
        assert raw == set(), (prefix, sorted(raw)[:5])
        shown = "".join(text for _, text in pages.values())
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "&lt;img src=x onerror=alert(2)&gt;" in shown
        dashboard = pages[prefix][1]
        assert 'data-attention="group"' in dashboard  # the hostile group is named in the band, escaped
        hot = pages[prefix + "workers/OrdersWorker/hot"][1]
        assert "&#34;&gt;&lt;script&gt;" in hot or "&quot;&gt;&lt;script&gt;" in hot
