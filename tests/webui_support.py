"""Fixtures and helpers of the console tests: a host app with the blueprint, seeded queues."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from queue_support import held_lease

import lowkiq
from lowkiq.runtime import Runtime
from lowkiq.webui import blueprint

XSS = "<script>alert(1)</script>"


class OrdersWorker(lowkiq.Worker):
    shards_count = 4
    max_retry_count = 5

    def perform(self, payloads_by_id: Any) -> None:
        pass


class MailerWorker(lowkiq.Worker):
    shards_count = 2
    queue_name = "mailer"

    def perform(self, payloads_by_id: Any) -> None:
        pass


WORKERS = [OrdersWorker, MailerWorker]


@pytest.fixture
def runtime(configure) -> Runtime:
    return configure(workers=WORKERS)


def host_app(prefix: str = "/lowkiq", **config: Any) -> Flask:
    app = Flask("host")
    app.config.update(TESTING=True, **config)
    app.register_blueprint(blueprint, url_prefix=prefix)
    return app


@pytest.fixture
def app(runtime: Runtime) -> Flask:
    return host_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def make_dead(rt: Runtime, worker: type[lowkiq.Worker], jobs: list[dict[str, Any]], error: bytes = b"boom") -> None:
    """Enqueue ``jobs`` and move them to the morgue. Call it while the queue is otherwise empty."""
    worker.perform_async(jobs)
    q = rt.queue(worker)
    for shard in range(worker.shards_count):
        taken = q.ack_and_take(None, (held_lease(q, shard), 1000))
        if taken and taken.jobs:
            q.fail(held_lease(q, shard), [(job.id, rt.clock() + 60) for job in taken.jobs], error, worker.max_retry_count)
    rt.actions(worker).kill_failed()


def fail(rt: Runtime, worker: type[lowkiq.Worker], job_ids: Iterable[str], error: bytes = b"boom") -> None:
    """Take the shards of ``job_ids`` and fail every job taken (a retry in 60 s)."""
    q = rt.queue(worker)
    for shard in sorted({q.shard_of(str(i)) for i in job_ids}):
        taken = q.ack_and_take(None, (held_lease(q, shard), 1000))
        q.fail(held_lease(q, shard), [(job.id, rt.clock() + 60) for job in taken.jobs], error, worker.max_retry_count)


def csrf(client: FlaskClient, path: str) -> str:
    """Open a page as a browser would (which sets the CSRF cookie) and return its form token."""
    page = client.get(path)
    assert page.status_code == 200, page.data
    match = re.search(rb'name="csrf_token" value="([0-9a-f]+)"', page.data)
    assert match, "no CSRF token on the page"
    return match.group(1).decode()


def ids_in(html: bytes) -> list[str]:
    """Job ids of a listing, in the order shown (the select checkboxes)."""
    return [m.decode() for m in re.findall(rb'name="ids" value="([^"]+)"', html)]


def counts(rt: Runtime, worker: type[lowkiq.Worker]) -> tuple[int, int]:
    """(queued ids, dead ids)."""
    from lowkiq.store.metrics import queue_metrics

    [m] = queue_metrics(rt.client, [worker.keys()])
    return m.length, m.morgue_length


def matching(client: FlaskClient, action: str, listing: str, **form: str) -> tuple[str, Any]:
    """A "matching" action as an operator does it: the button (a dry run, answered with a page that
    says the count and carries its token), then Confirm on that page.

    Returns the confirmation page's text and the response to Confirm.
    """
    token = csrf(client, listing)
    asked = client.post(action, data={"csrf_token": token, "next": listing, **form})
    assert asked.status_code == 200, asked.data
    found = re.search(rb'name="confirm" value="([^"]+)"', asked.data)
    assert found, "no confirmation token on the page"
    done = client.post(action, data={"csrf_token": token, "next": listing, "confirm": found.group(1).decode(), **form})
    return asked.get_data(as_text=True), done
