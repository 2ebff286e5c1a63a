"""The pytest plugin (entry point ``pytest11``: ``durq = durq.testing.plugin``).

Fixtures:

- ``durq_url``: a URL to an empty database for this test, removed afterwards. SQLite in a
  temporary directory by default; a fresh PostgreSQL schema (dropped afterwards) when
  ``--durq-url=postgresql://...`` or ``$DURQ_TEST_URL`` names a server.
- ``durq_app``: a :class:`durq.Durq` on ``durq_url``, closed afterwards. Register tasks on
  it, or point your own app at the URL with ``durq.testing.use_url(my_app, durq_url)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from durq.app import Durq
from durq.testing import temporary_url


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durq")
    group.addoption(
        "--durq-url",
        default=None,
        help="database for the durq_url/durq_app fixtures: a postgresql:// URL gets a "
        "fresh schema per test; default $DURQ_TEST_URL or a temporary SQLite file",
    )


@pytest.fixture
def durq_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL to an empty database for this test (see the module docstring)."""
    base = request.config.getoption("--durq-url") or os.environ.get("DURQ_TEST_URL")
    with temporary_url(base) as url:
        yield url


@pytest.fixture
def durq_app(durq_url: str) -> Iterator[Durq]:
    """A :class:`durq.Durq` on ``durq_url`` (no tasks yet), closed after the test."""
    app = Durq(durq_url)
    try:
        yield app
    finally:
        app.close()
