"""Take docs/dashboard.png, docs/morgue.png, docs/dashboard-390.png (a phone) and docs/dashboard-dark.png
from a seeded console in headless Chromium.

    .venv/bin/python docs/screenshots.py

Starts its own redis-server on a free port, seeds four workers (some jobs
processed, some failed, some dead), serves the console in this process and
points Debian's /usr/bin/chromium at it through Playwright.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from queue_support import held_lease  # noqa: E402
from redis_server import RedisServer, free_port  # noqa: E402

import lowkiq  # noqa: E402
from lowkiq.webui import blueprint  # noqa: E402
from lowkiq.webui.state import init_app  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ERRORS = [
    "ConnectionError: upstream https://billing.internal/api/v2/invoices answered 503 Service Unavailable",
    "KeyError: 'customer_id'",
    "TimeoutError: SMTP server did not answer within 30 s",
    "ValueError: amount must be positive, got -12.50",
]


class OrdersWorker(lowkiq.Worker):
    shards_count = 24
    batch_size = 10

    def perform(self, payloads_by_id):
        pass


class InvoicesWorker(lowkiq.Worker):
    shards_count = 8

    def perform(self, payloads_by_id):
        pass


class MailerWorker(lowkiq.Worker):
    shards_count = 5
    max_retry_count = 10

    def perform(self, payloads_by_id):
        pass


class WebhooksWorker(lowkiq.Worker):
    shards_count = 12
    batch_size = 50

    def perform(self, payloads_by_id):
        pass


WORKERS = [InvoicesWorker, MailerWorker, OrdersWorker, WebhooksWorker]


def seed(runtime: lowkiq.runtime.Runtime) -> None:
    rng = random.Random(7)
    now = time.time()
    for n, worker in enumerate(WORKERS):
        jobs = []
        for i in range(400 * (n + 1)):
            payload = {"order_id": 10_000 + i, "status": rng.choice(["paid", "shipped", "refunded"]),
                       "amount": round(rng.uniform(5, 500), 2)}
            if i % 37 == 0:
                payload["lines"] = [{"sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 5)} for _ in range(6)]
            jobs.append({"id": 10_000 + i, "payload": payload, "score": now - rng.uniform(0, 3600),
                         "perform_in": now + rng.choice([0, 0, 0, 30, 600, 7200])})
        worker.perform_async(jobs)
    for worker in WORKERS:
        fail_some(runtime, worker, rng, rounds=2)
    # Dead jobs: fail some, then kill them into the morgue; then fail a few more as retries.
    for worker in (OrdersWorker, MailerWorker, InvoicesWorker):
        fail_some(runtime, worker, rng, rounds=1)
        runtime.actions(worker).kill_failed()
        fail_some(runtime, worker, rng, rounds=1)


def fail_some(runtime: lowkiq.runtime.Runtime, worker: type[lowkiq.Worker], rng: random.Random, rounds: int) -> None:
    queue = runtime.queue(worker)
    for _ in range(rounds):
        for shard in range(worker.shards_count):
            lease = held_lease(queue, shard)
            taken = queue.ack_and_take(None, (lease, 3))
            if taken and taken.jobs:
                retries = [(job.id, time.time() + rng.choice([15, 120, 900])) for job in taken.jobs]
                queue.fail(lease, retries, rng.choice(ERRORS).encode(), worker.max_retry_count)


def process(runtime: lowkiq.runtime.Runtime, stop: threading.Event) -> None:
    """Drain a little, fail a little, so that the chart has a shape."""
    rng = random.Random(3)
    next_id = 50_000
    while not stop.is_set():
        for worker in WORKERS:
            worker.perform_async([{"id": next_id + i, "payload": {"n": i}} for i in range(rng.randint(2, 12))])
            next_id += 100
            queue = runtime.queue(worker)
            lease = held_lease(queue, rng.randrange(worker.shards_count))
            taken = queue.ack_and_take(None, (lease, rng.randint(1, 8)))
            if taken and taken.jobs:
                ids = [job.id for job in taken.jobs]
                if rng.random() < 0.15:
                    queue.fail(lease, [(i, time.time() + 600) for i in ids], b"TimeoutError: upstream timed out",
                               worker.max_retry_count)
                else:
                    queue.ack_and_take((lease, ids), None)
        time.sleep(0.01)


def seed_history(client, rng: random.Random) -> None:
    """Six hours of per-minute totals for every worker, as servers record them, so the history charts show."""
    from lowkiq.store.minute_totals import MinuteTotalsKeys

    now = int(time.time() // 60 * 60)
    for worker in WORKERS:
        processed = failed = 0
        pipe = client.pipeline(transaction=False)
        for m in range(6 * 60, 0, -1):
            minute = now - m * 60
            busy_hour = 1.0 + 0.8 * ((m // 60) % 3)
            processed += int(rng.uniform(800, 1200) * busy_hour)
            failed += rng.choice((0, 0, 0, 1, 2, 5))
            lag = max(0.0, rng.gauss(2, 1)) + (40 if 150 < m < 170 else 0)
            pipe.xadd(MinuteTotalsKeys.stream(worker.queue_name), {"at": (minute + 5) * 1000, "processed": processed,
                      "failed": failed, "lag": round(lag, 1), "length": 0, "dead": 0}, id=f"{minute * 1000}-0")
        pipe.execute()


def main() -> None:
    from flask import Flask
    from playwright.sync_api import sync_playwright

    server = RedisServer().start()
    try:
        runtime = lowkiq.configure(workers=WORKERS, redis_url=server.url)
        seed(runtime)
        seed_history(runtime.client, random.Random(7))
        app = Flask(__name__)
        app.config["LOWKIQ_WEB_POLL_INTERVAL"] = 1.0
        app.register_blueprint(blueprint)
        # The seeded history stands for what servers recorded; this console's own minute would not match it.
        init_app(app).history_allowed = False
        port = free_port()
        http = make_server("127.0.0.1", port, app, threaded=True)
        threading.Thread(target=http.serve_forever, daemon=True).start()
        stop = threading.Event()
        worker = threading.Thread(target=process, args=(runtime, stop), daemon=True)
        worker.start()
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/")
            page.wait_for_timeout(14_000)  # live refresh fills the chart
            stop.set()
            page.screenshot(path=str(ROOT / "docs" / "dashboard.png"), full_page=True)
            page.goto(base + "/workers/OrdersWorker/morgue?order_by=id")
            page.wait_for_selector(".tab-count")
            page.locator("details.payload").first.evaluate("e => e.open = true")
            boxes = page.locator("input[name=ids]")
            boxes.nth(1).check()
            boxes.nth(2).check()
            page.screenshot(path=str(ROOT / "docs" / "morgue.png"), full_page=True)
            phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True).new_page()
            phone.goto(base + "/")
            phone.wait_for_load_state("networkidle")
            phone.screenshot(path=str(ROOT / "docs" / "dashboard-390.png"), full_page=True)
            dark = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark").new_page()
            dark.goto(base + "/")
            dark.wait_for_load_state("networkidle")
            dark.screenshot(path=str(ROOT / "docs" / "dashboard-dark.png"), full_page=True)
            browser.close()
        http.shutdown()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
