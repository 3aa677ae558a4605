"""The console's /healthz: open to probes (no password, any Host), 200 while Redis answers, 503 when not;
every other page still asks for the password."""

from __future__ import annotations

from redis_server import free_port

from lowkiq.webui import create_app


def test_healthz_answers_a_probe_without_the_password_and_from_any_host(redis_url):
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "s3cret"})
    client = app.test_client()
    probe = client.get("/healthz", headers={"Host": "10.1.2.3:5000"})
    assert probe.status_code == 200
    assert probe.get_json()["status"] == "ok" and probe.get_json()["checks"]["redis"]["ok"] is True
    assert probe.headers["Cache-Control"].startswith("no-store")
    # the rest of the console still asks for the password
    assert client.get("/", headers={"Host": "localhost"}).status_code == 401
    assert client.get("/api/v1/servers", headers={"Host": "localhost"}).status_code == 401


def test_healthz_is_503_when_redis_does_not_answer():
    app = create_app(environ={"LOWKIQ_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    reply = app.test_client().get("/healthz")
    assert reply.status_code == 503
    body = reply.get_json()
    assert body["status"] == "unavailable" and body["checks"]["redis"]["ok"] is False
    assert "Redis does not answer" in body["checks"]["redis"]["reason"]


def test_healthz_of_a_mounted_console_follows_its_prefix(redis_url, configure):
    from webui_support import host_app

    configure(workers=[])
    client = host_app().test_client()
    assert client.get("/lowkiq/healthz").get_json()["status"] == "ok"
