"""The pytest plugin, as a user's suite gets it: a tiny app and test file in a folder of their own, run by
pytest in a subprocess; the plugin comes from lowkiq's entry point (``pytest11: lowkiq``)."""

from __future__ import annotations

import textwrap

import pytest
import redis
from testing_support import run_pytest

pytestmark = pytest.mark.slow  # each test is a pytest run of its own

APP = """
import lowkiq

class Pings(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass

lowkiq.configure(workers=[Pings], redis_url="redis://127.0.0.1:1/0", client_pool_size=3)
"""

TESTS = """
import os
from pathlib import Path

import lowkiq
import lowkiq.testing
from app import Pings

ELSEWHERE = "redis://127.0.0.1:1/0"


def test_a_test_without_the_fixture_is_left_alone():
    assert lowkiq.current().settings.redis_url == ELSEWHERE
    assert "LOWKIQ_REDIS_URL" not in os.environ


def test_the_fixture_configures_lowkiq_with_its_redis(lowkiq_redis):
    Path("url.txt").write_text(lowkiq_redis.url)
    settings = lowkiq.current().settings
    assert settings.redis_url == lowkiq_redis.url == os.environ["LOWKIQ_REDIS_URL"]
    assert settings.workers == (Pings,) and settings.client_pool_size == 3  # the app's other settings
    assert Pings.perform_async([{"id": 1}, {"id": 2}]) == 2
    assert lowkiq_redis.client.dbsize() > 0


def test_each_test_gets_it_flushed(lowkiq_redis):
    assert lowkiq_redis.client.dbsize() == 0
    Pings.perform_async([{"id": 3}])
    assert lowkiq.testing.drain(Pings) == {"Pings": ["3"]}


def test_the_configuration_is_put_back_after_the_test():
    assert lowkiq.current().settings.redis_url == ELSEWHERE
    assert "LOWKIQ_REDIS_URL" not in os.environ
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    (tmp_path / "test_pings.py").write_text(textwrap.dedent(TESTS))
    return tmp_path


def test_a_users_suite_gets_the_fixture_from_the_entry_point_and_the_server_stops_with_the_session(project):
    done = run_pytest(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout
    url = (project / "url.txt").read_text()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()


def test_with_autoloading_off_p_lowkiq_loads_it_by_its_entry_point_name(project):
    off = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = run_pytest(project, env=off)
    assert done.returncode != 0 and "fixture 'lowkiq_redis' not found" in done.stdout, done.stdout
    done = run_pytest(project, "-p", "lowkiq", env=off)
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout + done.stderr


def test_p_no_lowkiq_turns_it_off(project):
    done = run_pytest(project, "-p", "no:lowkiq")
    assert done.returncode != 0 and "fixture 'lowkiq_redis' not found" in done.stdout, done.stdout


def test_without_redis_server_on_path_the_embedded_one_is_used(project, tmp_path_factory):
    empty = tmp_path_factory.mktemp("no-redis-on-path")
    done = run_pytest(project, env={"PATH": str(empty)})
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout + done.stderr
