"""The console under any prefix, behind a proxy's SCRIPT_NAME, standalone, and from an app file."""

from __future__ import annotations

import re
import textwrap

import pytest
from flask import Flask
from webui_support import OrdersWorker, csrf, host_app, ids_in, make_dead

import lowkiq
from lowkiq.webui import blueprint, create_app


def links(html: str) -> list[str]:
    found = re.findall(r'(?:href|src|action|hx-get|formaction)="([^"]+)"', html)
    return [link for link in found if not link.startswith("data:")]


@pytest.mark.parametrize("prefix", ["/lowkiq", "/ops/queues", "/"])
def test_every_link_stays_under_the_prefix(runtime, prefix):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(3)])
    client = host_app(prefix).test_client()
    root = prefix.rstrip("/") + "/"
    for path in ("", "workers/OrdersWorker/morgue", "workers/OrdersWorker/enqueued", "workers/OrdersWorker/jobs/1"):
        reply = client.get(root + path)
        assert reply.status_code == 200, path
        for link in links(reply.get_data(as_text=True)):
            assert link.startswith(root), (path, link)
    assert client.get(root + "lowkiq-static/htmx.min.js").status_code == 200
    assert client.get(root + "api/v1/stats").get_json()["total"]["morgue_length"] == 3


def test_blueprint_assets_are_not_shadowed_by_the_host_static_at_the_root(runtime, tmp_path):
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "site.css").write_text("body{}")
    app = Flask("host", static_folder=str(tmp_path / "static"))
    app.register_blueprint(blueprint)
    client = app.test_client()
    assert client.get("/static/site.css").status_code == 200
    js = client.get("/lowkiq-static/htmx.min.js")
    assert js.status_code == 200 and b"htmx" in js.data
    assert js.headers.get("Cache-Control") != "no-store"  # assets are cacheable (versioned URLs)


def test_behind_a_reverse_proxy_script_name(runtime):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(3)])
    client = host_app("/lowkiq").test_client()
    # The proxy strips /proxy from the path and passes it as SCRIPT_NAME.
    behind = {"base_url": "http://localhost/proxy/"}
    page = client.get("/lowkiq/workers/OrdersWorker/morgue", **behind)
    assert page.request.environ["SCRIPT_NAME"] == "/proxy"
    html = page.get_data(as_text=True)
    assert all(link.startswith("/proxy/lowkiq/") for link in links(html)), links(html)
    assert "Path=/proxy/lowkiq/" in page.headers["Set-Cookie"]
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html).group(1)
    done = client.post(
        "/lowkiq/workers/OrdersWorker/morgue/requeue",
        data={"csrf_token": token, "ids": ["0"], "next": "/proxy/lowkiq/workers/OrdersWorker/morgue?order_by=id"},
        **behind,
    )
    assert done.status_code == 303
    assert done.headers["Location"] == "/proxy/lowkiq/workers/OrdersWorker/morgue?order_by=id"


def test_standalone_finds_workers_in_the_registry_without_app_code(redis_url, runtime):
    OrdersWorker.perform_async([{"id": 1}, {"id": 2}])  # a client registers the worker
    lowkiq.runtime._current = None  # the console process has no app code at all
    client = create_app(environ={"REDIS_URL": redis_url}).test_client()
    html = client.get("/").get_data(as_text=True)
    assert 'data-worker="OrdersWorker"' in html and "from the registry" in html
    assert client.get("/api/v1/stats").get_json()["by_worker"]["OrdersWorker"]["length"] == 2
    assert ids_in(client.get("/workers/OrdersWorker/enqueued?order_by=id").data) == ["1", "2"]
    assert client.get("/lowkiq-static/lowkiq.css").status_code == 200


def test_standalone_from_an_app_file(redis_url, r, tmp_path, monkeypatch):
    (tmp_path / "helpers.py").write_text("SHARDS = 3\n")
    app_file = tmp_path / "app.py"
    app_file.write_text(textwrap.dedent(f"""
        import lowkiq
        from helpers import SHARDS

        class FileWorker(lowkiq.Worker):
            shards_count = SHARDS
            def perform(self, payloads_by_id):
                pass

        lowkiq.configure(workers=[FileWorker], redis_url={redis_url!r})
    """))
    monkeypatch.setattr(lowkiq.runtime, "_current", None)
    client = create_app(environ={"LOWKIQ_APP": str(app_file)}).test_client()
    data = client.get("/api/v1/dashboard").get_json()
    assert [(q["name"], q["shards_count"]) for q in data["queues"]] == [("FileWorker", 3)]


def test_app_file_that_does_not_configure_is_a_clear_error(tmp_path, monkeypatch):
    app_file = tmp_path / "empty.py"
    app_file.write_text("x = 1\n")
    monkeypatch.setattr(lowkiq.runtime, "_current", None)
    with pytest.raises(RuntimeError, match=r"empty.py does not configure lowkiq: it must call lowkiq.configure"):
        create_app(environ={"LOWKIQ_APP": str(app_file)})
    with pytest.raises(RuntimeError, match="no such file"):
        create_app(environ={"LOWKIQ_APP": str(tmp_path / "missing.py")})


def test_host_app_follows_reconfiguration(configure, redis_url):
    app = host_app()
    configure(workers=[OrdersWorker])
    client = app.test_client()
    assert list(client.get("/lowkiq/api/v1/stats").get_json()["by_worker"]) == ["OrdersWorker"]

    class OtherWorker(lowkiq.Worker):
        def perform(self, payloads_by_id):
            pass

    configure(workers=[OtherWorker])
    assert list(client.get("/lowkiq/api/v1/stats").get_json()["by_worker"]) == ["OtherWorker"]


def test_host_app_form_round_trip_under_a_prefix(runtime):
    make_dead(runtime, OrdersWorker, [{"id": "a"}, {"id": "b"}])
    client = host_app("/admin/jobs").test_client()
    morgue = "/admin/jobs/workers/OrdersWorker/morgue"
    token = csrf(client, morgue)
    done = client.post("/admin/jobs/workers/OrdersWorker/morgue/requeue", data={"csrf_token": token, "ids": ["a"],
                                                                                "next": morgue})
    assert done.status_code == 303 and done.headers["Location"] == morgue
    assert ids_in(client.get(morgue).data) == ["b"]
