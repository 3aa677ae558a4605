"""examples/django_project: lowkiq configured from settings.LOWKIQ, the console mounted in the project's URLs
behind Django's auth (staff only, the Django user in the audit log), and `manage.py lowkiq` as the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from examples_support import csrf_token, links, on_path
from redis_server import RedisServer
from server_support import queue_empty
from timing_support import wait_until

import lowkiq

EXAMPLE = "django_project"


@pytest.fixture(scope="module")
def django_site(redis_server: RedisServer) -> Iterator[None]:
    """The example project set up in this process, its database a fresh in-memory one."""
    folder = on_path(EXAMPLE)
    # Django sets the process's TZ (and calls tzset) from TIME_ZONE: put it back for the tests after these.
    tz = os.environ.get("TZ")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_SETTINGS_MODULE", "mysite.settings")
        patch.setenv("LOWKIQ_REDIS_URL", redis_server.url)  # the example's settings read it
        patch.chdir(folder)
        import django
        from django.db import connection
        from django.test.utils import setup_test_environment, teardown_test_environment

        django.setup()
        setup_test_environment()
        old_name = connection.creation.create_test_db(verbosity=0)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()
        if tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = tz
        time.tzset()


@pytest.fixture
def site(django_site: None, r: redis.Redis) -> Iterator[Any]:
    """lowkiq configured from the settings again (other tests leave it unconfigured), on a flushed Redis."""
    from lowkiq.contrib.django import conf

    conf.configure()
    from orders.workers import OrdersWorker

    yield OrdersWorker
    lowkiq.runtime._current = None


def staff_user(name: str = "grace") -> Any:
    from django.contrib.auth.models import User

    return User.objects.filter(username=name).first() or User.objects.create_user(name, password="x", is_staff=True)


def staff_client(name: str = "grace") -> Any:
    from django.test import Client

    client = Client()
    client.force_login(staff_user(name))
    return client


def test_settings_configure_lowkiq_at_start_up(django_site: None, redis_server: RedisServer) -> None:
    from django.apps import apps

    from lowkiq.contrib.django import conf

    lowkiq.runtime._current = None
    apps.get_app_config("lowkiq").ready()
    settings = lowkiq.current().settings
    assert settings.redis_url == redis_server.url
    assert [w.__name__ for w in settings.workers] == ["OrdersWorker"]
    assert settings.server_middlewares[0] is conf.fresh_database_connections
    lowkiq.runtime._current = None


def test_a_worker_path_that_does_not_import_is_named(django_site: None) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from lowkiq.contrib.django import conf

    with override_settings(LOWKIQ={"workers": ["orders.workers.OrderWorker"]}), \
            pytest.raises(ImproperlyConfigured, match=r'settings.LOWKIQ\["workers"\]\[0\]: cannot import '
                                                      r"'orders.workers.OrderWorker'"):
        conf.configure()
    with override_settings(LOWKIQ={"workers": ["orders.workers.OrdersWorker"], "threads": 4}), \
            pytest.raises(ImproperlyConfigured, match=r"settings.LOWKIQ: lowkiq.configure\(\) got unknown options \['threads'\]"):
        conf.configure()


def test_anonymous_visitors_are_sent_to_the_login_page(site: Any, r: redis.Redis) -> None:
    from django.test import Client

    client = Client()
    page = client.get("/lowkiq/")
    assert page.status_code == 302 and page["Location"] == "/admin/login/?next=/lowkiq/"
    site.perform_async([{"id": 7}])
    before = r.dbsize()
    refused = client.post("/lowkiq/workers/OrdersWorker/pause", {"csrf_token": "0" * 64})
    assert refused.status_code == 302 and r.dbsize() == before  # nothing paused, no audit entry


def test_signed_in_users_who_are_not_staff_are_refused(site: Any) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_user("mallory", password="x"))
    assert client.get("/lowkiq/").status_code == 403


def test_staff_see_the_dashboard_with_every_link_under_the_mount(site: Any) -> None:
    site.perform_async([{"id": 1}, {"id": 2}])
    client = staff_client()
    page = client.get("/lowkiq/")
    assert page.status_code == 200, page.content[:500]
    html = page.content.decode()
    assert "Dashboard" in html and 'data-worker="OrdersWorker"' in html
    found = links(html)
    assert found and all(link.startswith("/lowkiq/") for link in found), found
    assert page["Content-Security-Policy"] and page["Cache-Control"] == "no-store"
    asset = client.get("/lowkiq/lowkiq-static/htmx.min.js")
    assert asset.status_code == 200 and b"htmx" in asset.content
    stats = client.get("/lowkiq/api/v1/stats")
    assert stats.status_code == 200 and stats.json()["by_worker"]["OrdersWorker"]["length"] == 2


def test_an_export_streams_through_django(site: Any) -> None:
    site.perform_async([{"id": i, "payload": {"n": i}} for i in range(250)])
    export = staff_client().get("/lowkiq/workers/OrdersWorker/enqueued/export?format=jsonl")
    assert export.status_code == 200 and export.streaming
    assert export["Content-Disposition"].startswith('attachment; filename="OrdersWorker-enqueued-')
    rows = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert sorted(int(row["id"]) for row in rows) == list(range(250))


def test_an_action_from_the_console_is_audited_with_the_django_user(site: Any) -> None:
    from lowkiq.store import pausing

    site.perform_async([{"id": 1}])
    client = staff_client("grace")
    worker_page = "/lowkiq/workers/OrdersWorker/enqueued"
    token = csrf_token(client.get(worker_page).content.decode())
    done = client.post("/lowkiq/workers/OrdersWorker/pause", {"csrf_token": token, "next": worker_page})
    assert done.status_code == 303 and done["Location"] == worker_page
    assert pausing.paused(lowkiq.current().client)[site.queue_name].who == "grace"
    # The flash the action left comes back through Django's cookies.
    assert "Paused OrdersWorker" in client.get(worker_page).content.decode()
    [entry] = client.get("/lowkiq/api/v1/audit").json()["entries"]
    assert (entry["who"], entry["action"], entry["source"]) == ("grace", "pause", "console")


def test_the_consoles_own_csrf_guards_its_forms_and_logging_out_voids_their_tokens(site: Any) -> None:
    client = staff_client()
    worker_page = "/lowkiq/workers/OrdersWorker/enqueued"
    site.perform_async([{"id": 1}])
    assert client.post("/lowkiq/workers/OrdersWorker/pause", {"next": worker_page}).status_code == 403
    token = csrf_token(client.get(worker_page).content.decode())
    assert client.post("/admin/logout/").status_code == 200  # as a browser does: the other cookies stay
    client.force_login(staff_user())
    stale = client.post("/lowkiq/workers/OrdersWorker/pause", {"csrf_token": token, "next": worker_page})
    assert stale.status_code == 403 and b"security token" in stale.content
    assert client.get("/lowkiq/api/v1/audit").json()["entries"] == []


def test_the_consoles_settings_come_from_the_setting_too(site: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.conf import settings
    from django.test import override_settings

    from lowkiq.contrib.django import console

    monkeypatch.setattr(console, "_app", None)  # built again, from these settings
    read_only = {**settings.LOWKIQ, "console": {"LOWKIQ_WEB_READONLY": True}}
    site.perform_async([{"id": 1}])
    with override_settings(LOWKIQ=read_only):
        client = staff_client()
        assert 'method="post"' not in client.get("/lowkiq/workers/OrdersWorker/enqueued").content.decode()
        refused = client.post("/lowkiq/api/v1/workers/OrdersWorker/pause", content_type="application/json", data={})
        assert refused.status_code == 403 and refused.json() == {"error": "The console is read-only."}


def test_a_view_of_the_project_enqueues(site: Any, r: redis.Redis) -> None:
    client = staff_client()
    done = client.post("/orders/42/sync")
    assert done.status_code == 202 and done.json() == {"enqueued": 1}
    stats = client.get("/lowkiq/api/v1/stats").json()
    assert stats["by_worker"]["OrdersWorker"]["length"] == 1
    bad = client.post("/orders/4%0A2/sync")
    assert bad.status_code == 400 and "control character" in bad.json()["error"]


def test_manage_py_lowkiq_refuses_what_it_cannot_run_in_one_line(site: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import call_command

    with pytest.raises(SystemExit) as stopped:
        call_command("lowkiq", "--processes", "2")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == ("lowkiq: --processes starts lowkiq -r APP.py children, and this server's app "
                                       "comes from settings.LOWKIQ: start one server per core instead (each with "
                                       "--cpus N); they share the shards through leases\n")


@pytest.mark.slow
def test_manage_py_lowkiq_performs_jobs_and_stops_on_sigterm(site: Any, redis_server: RedisServer, tmp_path) -> None:
    folder = on_path(EXAMPLE)
    site.perform_async([{"id": 42, "payload": {"total": 9}}])
    log_path = tmp_path / "server.log"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "mysite.settings", "LOWKIQ_REDIS_URL": redis_server.url,
           "LOWKIQ_TTIN_FILE": str(tmp_path / "ttin.txt")}
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "manage.py", "lowkiq", "--threads", "2"], cwd=folder, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "order 42 synced: {'total': 9}" in log_path.read_text(), timeout=20)
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0, log_path.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    assert "SIGTERM: stopping after the in-flight batches" in log_path.read_text()
    assert queue_empty(redis.Redis.from_url(redis_server.url), site)
