"""Listings, exports and the job page carry a bounded number of payload bytes per job, cut in Redis.

Measured on Redis's side (INFO stats total_net_output_bytes): what a page does not show never
crosses the wire, and each response says what was cut and the whole size.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient
from webui_support import OrdersWorker, make_dead

from lowkiq.jobs import ClippedPayload
from lowkiq.runtime import Runtime
from lowkiq.store.queries import JOB_BYTES, ROW_BYTES
from lowkiq.webui.export import EXPORT_ROW_BYTES

W = "/lowkiq/workers/OrdersWorker"
API = "/lowkiq/api/v1/workers/OrdersWorker"
MB = 1_000_000


def sent(r: redis.Redis) -> int:
    """Bytes Redis wrote to its clients since the last CONFIG RESETSTAT."""
    return int(r.info("stats")["total_net_output_bytes"])


def big(n: int, size: int = MB) -> list[dict[str, Any]]:
    return [{"id": f"big-{i:02}", "payload": {"n": i, "blob": "x" * size}} for i in range(n)]


@pytest.mark.slow
def test_a_listing_page_of_50_jobs_of_1_mb_moves_kilobytes(client: FlaskClient, runtime: Runtime,
                                                            r: redis.Redis) -> None:
    OrdersWorker.perform_async(big(50))
    r.config_resetstat()
    reply = client.get(API + "/enqueued?order_by=id&limit=100")
    assert reply.status_code == 200
    assert sent(r) < 50 * ROW_BYTES + 100_000
    assert len(reply.data) < 50 * ROW_BYTES + 50_000  # was 50 MB
    jobs = reply.get_json()["jobs"]
    assert len(jobs) == 50
    for job in jobs:
        assert job["clipped"]["payloads"] == 1 and job["clipped"]["payloads_shown"] == 1
        assert job["clipped"]["payloads_bytes"] > MB and job["clipped"]["cap_bytes"] == ROW_BYTES
        [[payload, _]] = job["payloads"]
        assert payload.startswith('{"blob":"xxx') and payload.endswith("bytes shown>")
        whole = len(json.dumps({"blob": "x" * MB, "n": int(job["id"][4:])}, separators=(",", ":")))
        assert payload.endswith(f" of {whole:,} bytes shown>")  # the whole size, said

    r.config_resetstat()
    page = client.get(W + "/enqueued?order_by=id&limit=50")
    assert page.status_code == 200
    assert sent(r) < 50 * ROW_BYTES + 100_000 and len(page.data) < 2 * MB
    assert page.get_data(as_text=True).count("data-clipped") == 50


@pytest.mark.slow
def test_an_export_streams_rows_cut_at_its_own_cap(client: FlaskClient, runtime: Runtime, r: redis.Redis) -> None:
    OrdersWorker.perform_async(big(50))
    r.config_resetstat()
    reply = client.get(W + "/enqueued/export?format=jsonl&order_by=id")
    body = reply.get_data()
    assert sent(r) < 50 * EXPORT_ROW_BYTES + 200_000  # was 50 MB, 1.9 GB at 500 jobs
    assert len(body) < 50 * (EXPORT_ROW_BYTES + 1_000)
    rows = [json.loads(line) for line in body.splitlines()]
    assert [row["id"] for row in rows] == [f"big-{i:02}" for i in range(50)]
    assert all(row["clipped"]["cap_bytes"] == EXPORT_ROW_BYTES and row["clipped"]["payloads_bytes"] > MB
               for row in rows)

    csv = client.get(W + "/enqueued/export?format=csv&order_by=id").get_data(as_text=True)
    assert csv.splitlines()[0] == "id,payloads,perform_in,retry_count,error,clipped"
    assert csv.count('""payloads_bytes""') == 50


def test_small_jobs_are_whole_and_the_cut_keeps_whole_payloads_in_order(client: FlaskClient, runtime: Runtime) -> None:
    OrdersWorker.perform_async([{"id": "small", "payload": {"a": 1}}])
    versions = [{"id": "many", "payload": {"v": i, "pad": "p" * 90}, "score": i} for i in range(1000)]
    OrdersWorker.perform_async(versions)
    jobs = {job.id: job for job in runtime.queries(OrdersWorker).enqueued("id", limit=10).rows}
    assert jobs["small"].clipped is None and jobs["small"].payloads[0][0] == {"a": 1}
    many = jobs["many"]
    assert many.clipped is not None and many.clipped.payloads == 1000
    whole = [p for p, _ in many.payloads if not isinstance(p, ClippedPayload)]
    assert 30 < len(whole) < 45 and whole == [v["payload"] for v in versions[: len(whole)]]
    assert [s for _, s in many.payloads] == [float(i) for i in range(len(many.payloads))]
    assert many.clipped.shown == len(many.payloads)
    page = client.get(W + "/enqueued?order_by=id").get_data(as_text=True)
    assert "+ 999 more payloads" in page


def test_the_job_page_shows_a_job_whole_up_to_its_cap_and_says_when_it_cut(client: FlaskClient, runtime: Runtime,
                                                                             r: redis.Redis) -> None:
    OrdersWorker.perform_async([{"id": "one", "payload": "y" * MB}, {"id": "two", "payload": "z" * (2 * MB)}])
    one = client.get(API + "/jobs/one").get_json()["queued"]
    assert "clipped" not in one and one["payloads"][0][0] == "y" * MB
    r.config_resetstat()
    two = client.get(API + "/jobs/two").get_json()["queued"]
    assert sent(r) < JOB_BYTES + 100_000
    assert two["clipped"]["payloads_bytes"] > 2 * MB and two["clipped"]["cap_bytes"] == JOB_BYTES
    page = client.get(W + "/job?id=two").get_data(as_text=True)
    assert "data-clipped" in page and "a page shows 1.00M at most" in page.replace("1.0 MB", "1.00M")


def test_errors_are_cut_in_listings_and_say_so(client: FlaskClient, runtime: Runtime, r: redis.Redis) -> None:
    make_dead(runtime, OrdersWorker, [{"id": "d1", "payload": "p"}], error=b"E" * 200_000)
    r.config_resetstat()
    [row] = client.get(API + "/morgue").get_json()["jobs"]
    assert sent(r) < 10_000
    assert row["error"].startswith("EEE") and row["error"].endswith("of 200,000 bytes shown>")
    assert row["clipped"]["error_bytes"] == 200_000 and row["clipped"]["payloads_shown"] == 1
    looked = client.get(API + "/jobs/d1").get_json()["morgue"]
    assert looked["error"] == "E" * 200_000 and "clipped" not in looked
