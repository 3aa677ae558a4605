"""Fixtures of the server's tests."""

from __future__ import annotations

import pytest
from server_support import import_app


@pytest.fixture
def app(configure):
    """The example app every server test runs, its workers configured."""
    module = import_app()
    configure(workers=list(module.WORKERS.values()))
    return module
