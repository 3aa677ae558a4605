"""Console settings: strict values, read at request time, and no silent fall-back to an open console."""

from __future__ import annotations

import base64
import logging

import pytest
from webui_support import OrdersWorker, host_app, make_dead

from lowkiq.webui import create_app
from lowkiq.webui.settings import SettingError, boolean, from_config

W = "/lowkiq/workers/OrdersWorker"


# ---- accepted values -------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("1", True), ("TRUE", True), ("Yes", True), ("on", True),
                                         ("0", False), ("false", False), ("NO", False), ("Off", False)])
def test_booleans_accept_the_documented_words_in_any_case(text, value):
    assert boolean(text) is value


@pytest.mark.parametrize("variable, text", [
    ("LOWKIQ_WEB_READONLY", "1 "),
    ("LOWKIQ_WEB_READONLY", " true"),
    ("LOWKIQ_WEB_READONLY", "y"),
    ("LOWKIQ_WEB_READONLY", "enabled"),
    ("LOWKIQ_WEB_READONLY", ""),
    ("LOWKIQ_WEB_ALLOW_NO_AUTH", "2"),
    ("LOWKIQ_WEB_POLL_INTERVAL", "nan"),
    ("LOWKIQ_WEB_POLL_INTERVAL", "3s"),
    ("LOWKIQ_WEB_POLL_INTERVAL", "0"),
    ("LOWKIQ_WEB_POLL_INTERVAL", " 3"),
    ("LOWKIQ_WEB_REDIS_TIMEOUT", "inf"),
    ("LOWKIQ_WEB_REDIS_TIMEOUT", "-1"),
    ("LOWKIQ_WEB_MAX_CONTENT_LENGTH", "1e6"),
    ("LOWKIQ_WEB_MAX_CONTENT_LENGTH", "10"),
    ("LOWKIQ_WEB_USER", ""),
    ("LOWKIQ_WEB_USER", "a:b"),
    ("LOWKIQ_WEB_SECRET_KEY", ""),
    ("LOWKIQ_WEB_TRUSTED_ORIGINS", "ops.example.com"),
])
def test_a_bad_setting_stops_create_app_with_one_line_naming_it(redis_url, variable, text):
    with pytest.raises(SettingError) as raised:
        create_app(environ={"LOWKIQ_REDIS_URL": redis_url, variable: text})
    message = str(raised.value)
    assert variable in message and "\n" not in message


def test_an_empty_password_is_an_error_not_an_open_console(redis_url):
    """LOWKIQ_WEB_PASSWORD="" used to turn authentication off silently."""
    with pytest.raises(SettingError, match="LOWKIQ_WEB_PASSWORD='' is not valid: it is set but empty"):
        create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": ""})


def test_a_wrong_password_setting_never_shows_the_secret(redis_url):
    with pytest.raises(SettingError) as raised:
        from_config({"LOWKIQ_WEB_SECRET_KEY": 12345})
    assert "12345" not in str(raised.value) and "<hidden>" in str(raised.value)


def test_every_environment_value_is_used_parsed(redis_url, runtime):
    OrdersWorker.perform_async([{"id": 1}])
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_READONLY": "ON",
                              "LOWKIQ_WEB_POLL_INTERVAL": "7.5", "LOWKIQ_WEB_MAX_CONTENT_LENGTH": "2048"})
    client = app.test_client()
    assert 'every 7.5s' in client.get("/").get_data(as_text=True)
    refused = client.post("/api/v1/workers/OrdersWorker/perform_all_now", data="{}", content_type="application/json")
    assert refused.status_code == 403


# ---- read at request time ------------------------------------------------------------


def test_read_only_set_on_the_host_after_mounting_is_honoured(runtime):
    """The blueprint read LOWKIQ_WEB_READONLY once, at registration: a host that configures
    itself after register_blueprint (an app factory, config.from_envvar) stayed writable."""
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    app = host_app()
    client = app.test_client()
    assert 'method="post"' in client.get(W + "/morgue").get_data(as_text=True)
    app.config["LOWKIQ_WEB_READONLY"] = True
    assert 'method="post"' not in client.get(W + "/morgue").get_data(as_text=True)
    api = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete_all", data="{}", content_type="application/json")
    assert api.status_code == 403 and api.get_json() == {"error": "The console is read-only."}
    assert client.post(W + "/morgue/delete_all", data={}).status_code == 403
    app.config["LOWKIQ_WEB_READONLY"] = "off"
    assert 'method="post"' in client.get(W + "/morgue").get_data(as_text=True)


def test_every_setting_is_read_when_the_request_comes(runtime):
    app = host_app()
    client = app.test_client()
    app.config.update(LOWKIQ_WEB_POLL_INTERVAL=9, LOWKIQ_WEB_PASSWORD="p", LOWKIQ_WEB_MAX_CONTENT_LENGTH=1024)
    assert "every 9.0s" not in client.get("/lowkiq/").get_data(as_text=True)  # 401 now: the password is set
    auth = {"Authorization": "Basic " + base64.b64encode(b"admin:p").decode()}
    assert "every 9.0s" in client.get("/lowkiq/", headers=auth).get_data(as_text=True)
    big = client.post("/lowkiq/api/v1/workers/OrdersWorker/morgue/delete", data="{" + " " * 2000 + "}",
                      content_type="application/json", headers=auth)
    assert big.status_code == 413


def test_a_bad_value_set_on_the_host_fails_loudly(runtime):
    with pytest.raises(SettingError, match="LOWKIQ_WEB_READONLY"):
        host_app(LOWKIQ_WEB_READONLY="sure")
    app = host_app()
    app.config["LOWKIQ_WEB_READONLY"] = "y"
    reply = app.test_client().get("/lowkiq/api/v1/stats")
    assert reply.status_code == 500 and "LOWKIQ_WEB_READONLY='y' is not valid" in reply.get_json()["error"]


# ---- no password on a public address -------------------------------------------------------


@pytest.mark.slow
def test_without_a_password_a_public_address_needs_an_explicit_opt_in(redis_url, runtime, caplog):
    public = {"SERVER_NAME": "0.0.0.0"}
    app = create_app(environ={"LOWKIQ_REDIS_URL": redis_url})
    client = app.test_client()
    assert client.get("/").status_code == 200  # the test client is localhost
    assert client.get("/", environ_overrides={"SERVER_NAME": "::1"}).status_code == 200
    refused = client.get("/api/v1/stats", environ_overrides=public)
    assert refused.status_code == 403 and "LOWKIQ_WEB_ALLOW_NO_AUTH" in refused.get_json()["error"]
    assert client.get("/", environ_overrides={"SERVER_NAME": "10.1.2.3"}).status_code == 403
    with caplog.at_level(logging.WARNING, logger="lowkiq.webui"):
        opted = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_ALLOW_NO_AUTH": "1"}).test_client()
        assert opted.get("/", environ_overrides=public).status_code == 200
        assert opted.get("/", environ_overrides=public).status_code == 200
    warnings = [r for r in caplog.records if "without a password" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    secured = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "p"}).test_client()
    auth = {"Authorization": "Basic " + base64.b64encode(b"admin:p").decode()}
    assert secured.get("/", environ_overrides=public, headers=auth).status_code == 200
