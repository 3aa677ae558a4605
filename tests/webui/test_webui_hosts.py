"""DNS rebinding: a standalone console without a password answers only loopback Host names and
LOWKIQ_WEB_ALLOWED_HOSTS; a mounted blueprint follows its host app's TRUSTED_HOSTS."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import time

import pytest
from redis_server import free_port
from server_support import lowkiq_bin
from webui_support import OrdersWorker, counts, csrf, host_app, make_dead

from lowkiq.store import registry
from lowkiq.webui import create_app
from lowkiq.webui.hosts import allowed_hosts, host_name, is_loopback
from lowkiq.webui.settings import SettingError

REBIND = "rebind.attacker.test"
API = "/api/v1/workers/OrdersWorker"


@pytest.fixture(autouse=True)
def registered(runtime) -> None:
    """The standalone console finds workers in the registry that servers and clients keep."""
    registry.register(runtime.client, [OrdersWorker])


def standalone(redis_url: str, **env: str):
    return create_app(environ={"LOWKIQ_REDIS_URL": redis_url, **env}).test_client()


def test_the_test_client_addresses_localhost(redis_url, runtime):
    """Every other console test relies on it: the Flask test client sends Host: localhost."""
    client = standalone(redis_url)
    reply = client.get("/api/v1/stats")
    assert reply.status_code == 200 and reply.request.host == "localhost"


def test_a_rebound_name_is_refused_on_pages_the_api_assets_and_posts(redis_url, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = standalone(redis_url)
    token = csrf(client, "/workers/OrdersWorker/morgue")
    rebound = {"Host": REBIND}
    # What the attacker's page sends once its name resolves to 127.0.0.1: the same origin as itself.
    same_origin = {**rebound, "Origin": f"http://{REBIND}", "Sec-Fetch-Site": "same-origin"}
    replies = [
        client.get("/", headers=rebound),
        client.get("/workers/OrdersWorker/morgue", headers=rebound),
        client.get("/lowkiq-static/lowkiq.css", headers=rebound),
        client.get("/nothing/here", headers=rebound),
        client.post("/workers/OrdersWorker/morgue/delete_all", data={"csrf_token": token}, headers=same_origin),
    ]
    for reply in replies:
        assert reply.status_code == 400, reply.request.path
        page = reply.get_data(as_text=True)
        assert "rebind.attacker.test" in page and "LOWKIQ_WEB_ALLOWED_HOSTS" in page
    for reply in (client.get("/api/v1/stats", headers=rebound),
                  client.post(API + "/morgue/delete_all", data="{}", content_type="application/json",
                              headers=same_origin),
                  client.post(API + "/morgue/delete_all", headers=same_origin)):
        assert reply.status_code == 400
        error = reply.get_json()["error"]
        assert error.startswith("Host 'rebind.attacker.test' is not allowed: this console has no password")
        assert "add the name to LOWKIQ_WEB_ALLOWED_HOSTS" in error
        assert reply.headers["Content-Security-Policy"]  # the refusal carries the console's headers too
    assert counts(runtime, OrdersWorker) == (0, 1)


@pytest.mark.parametrize("host", [
    "localhost", "localhost:8000", "LOCALHOST:8000", "localhost.", "ops.localhost", "a.b.localhost:1",
    "127.0.0.1", "127.0.0.1:8000", "127.1.2.3:80", "[::1]", "[::1]:8000",
])
def test_loopback_names_and_addresses_are_answered(redis_url, runtime, host):
    client = standalone(redis_url)
    assert client.get("/api/v1/stats", headers={"Host": host}).status_code == 200
    reply = client.post(API + "/perform_all_now", headers={"Host": host})
    assert reply.status_code == 200 and reply.get_json() == {"count": 0}


@pytest.mark.parametrize("host", [
    "localhost.attacker.test", "127.0.0.1.nip.io", "[::2]", "10.0.0.1", "0.0.0.0:8000", "ops.example.com",
    "localhost:x", "local host", "[::1", "",
])
def test_other_names_are_refused(redis_url, runtime, host):
    reply = standalone(redis_url).get("/api/v1/stats", headers={"Host": host})
    assert reply.status_code == 400 and "is not allowed" in reply.get_json()["error"]


def test_allowed_hosts_are_answered_with_any_port_or_case(redis_url, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    client = standalone(redis_url, LOWKIQ_WEB_ALLOWED_HOSTS="ops.example.com, 10.0.0.5:8000,[fd00::1]")
    for host in ("ops.example.com", "OPS.Example.com:8443", "10.0.0.5", "10.0.0.5:9", "[fd00::1]:80", "localhost"):
        assert client.get("/api/v1/stats", headers={"Host": host}).status_code == 200, host
    assert client.get("/api/v1/stats", headers={"Host": "other.example.com"}).status_code == 400
    posted = client.post(API + "/morgue/delete_all", data="{}", content_type="application/json",
                         headers={"Host": "ops.example.com:8443", "Origin": "https://ops.example.com:8443"})
    assert posted.get_json() == {"count": 1}


def test_with_a_password_hosts_are_checked_only_when_a_list_is_set(redis_url, runtime):
    auth = {"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode()}
    open_to_any = standalone(redis_url, LOWKIQ_WEB_PASSWORD="pw")
    assert open_to_any.get("/api/v1/stats", headers={**auth, "Host": "ops.example.com"}).status_code == 200
    listed = standalone(redis_url, LOWKIQ_WEB_PASSWORD="pw", LOWKIQ_WEB_ALLOWED_HOSTS="ops.example.com")
    assert listed.get("/api/v1/stats", headers={**auth, "Host": "ops.example.com"}).status_code == 200
    refused = listed.get("/api/v1/stats", headers={**auth, "Host": REBIND})
    assert refused.status_code == 400
    assert "this console answers only loopback names" in refused.get_json()["error"]


def test_behind_a_proxy_the_forwarded_host_is_the_one_checked(redis_url, runtime):
    """With LOWKIQ_WEB_PROXIES the browser's name is X-Forwarded-Host: that is what must be allowed."""
    env = {"LOWKIQ_WEB_PROXIES": "1", "LOWKIQ_WEB_ALLOW_NO_AUTH": "1"}
    client = standalone(redis_url, **env)
    assert client.get("/api/v1/stats", headers={"X-Forwarded-Host": "ops.example.com"}).status_code == 400
    allowed = standalone(redis_url, **env, LOWKIQ_WEB_ALLOWED_HOSTS="ops.example.com")
    assert allowed.get("/api/v1/stats", headers={"X-Forwarded-Host": "ops.example.com"}).status_code == 200


def test_an_origin_must_name_an_allowed_host_too(redis_url, runtime):
    client = standalone(redis_url)
    for origin in ("http://localhost", "http://127.0.0.1"):
        host = origin.split("//")[1]
        reply = client.post(API + "/perform_all_now", headers={"Host": host, "Origin": origin})
        assert reply.status_code == 200, origin
    foreign = client.post(API + "/perform_all_now", headers={"Origin": f"http://{REBIND}"})
    assert foreign.status_code == 403 and "Cross-origin" in foreign.get_json()["error"]


def test_a_mounted_blueprint_follows_the_host_app_s_trusted_hosts(runtime):
    free = host_app().test_client()  # the host app decides: by default Flask answers any Host
    assert free.get("/lowkiq/api/v1/stats", headers={"Host": REBIND}).status_code == 200
    trusting = host_app(TRUSTED_HOSTS=["localhost", "ops.example.com"]).test_client()
    assert trusting.get("/lowkiq/api/v1/stats", headers={"Host": "ops.example.com"}).status_code == 200
    assert trusting.get("/lowkiq/api/v1/stats", headers={"Host": REBIND}).status_code == 400
    assert trusting.post("/lowkiq/api/v1/workers/OrdersWorker/perform_all_now",
                         headers={"Host": REBIND}).status_code == 400
    # The console's own list, when the host app sets it, is honoured as well.
    listed = host_app(LOWKIQ_WEB_ALLOWED_HOSTS="ops.example.com").test_client()
    assert listed.get("/lowkiq/api/v1/stats", headers={"Host": "ops.example.com"}).status_code == 200
    assert listed.get("/lowkiq/api/v1/stats", headers={"Host": REBIND}).status_code == 400


def test_the_setting_is_parsed_strictly():
    assert allowed_hosts(" Ops.Example.com:8000 , 10.0.0.5,[::1]:80,, ") == ("ops.example.com", "10.0.0.5", "::1")
    assert allowed_hosts("") == ()
    for bad in ("https://ops.example.com", "ops.example.com/jobs", "*", "a b", "ops.example.com:x", "[zz]"):
        with pytest.raises(ValueError):
            allowed_hosts(bad)
    with pytest.raises(SettingError, match="LOWKIQ_WEB_ALLOWED_HOSTS='https://x' is not valid"):
        create_app(environ={"LOWKIQ_WEB_ALLOWED_HOSTS": "https://x"})
    assert host_name("[::1]:8000") == "::1" and host_name("::1") == "::1" and host_name("Example.COM.") == "example.com"
    assert is_loopback("127.255.0.1") and is_loopback("x.localhost") and not is_loopback("localhost.example")


# ---- a real `lowkiq web` --------------------------------------------------------------------


def raw_get(port: int, path: str, host: str) -> tuple[int, bytes]:
    """A request whose Host header is exactly ``host``, as a browser sends it after a rebinding."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


@pytest.mark.slow
def test_lowkiq_web_refuses_a_rebound_host(tmp_path, redis_url, runtime):
    port = free_port()
    env = {**os.environ, "LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_ALLOWED_HOSTS": "console.test"}
    process = subprocess.Popen([lowkiq_bin(), "web", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                status, _ = raw_get(port, "/api/v1/stats", f"127.0.0.1:{port}")
                break
            except OSError:
                assert time.monotonic() < deadline, "the console never answered"
                time.sleep(0.2)
        assert status == 200
        assert raw_get(port, "/api/v1/stats", f"localhost:{port}")[0] == 200
        assert raw_get(port, "/api/v1/stats", f"console.test:{port}")[0] == 200
        status, body = raw_get(port, "/api/v1/stats", f"{REBIND}:{port}")
        assert status == 400 and "LOWKIQ_WEB_ALLOWED_HOSTS" in json.loads(body)["error"]
        status, body = raw_get(port, "/", REBIND)
        assert status == 400 and b"is not allowed" in body
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
