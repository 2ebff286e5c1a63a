"""The conformance suite runs every test here against each backend.

``backend_url`` yields a fresh, empty database URL per test for each backend; a backend
whose server is absent is skipped with a reason (and fails under CI=true).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durq
from tests.conftest import Clock

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def app(backend_url: str, clock: Clock) -> Iterator[durq.Durq]:
    dq = durq.Durq(backend_url, clock=clock)
    yield dq
    dq.close()


@pytest.fixture
def make(backend_url: str, clock: Clock) -> Iterator[Callable[[], durq.Durq]]:
    """Open further Durq instances on the same database (a restart, another producer)."""
    opened: list[durq.Durq] = []

    def _make() -> durq.Durq:
        dq = durq.Durq(backend_url, clock=clock)
        opened.append(dq)
        return dq

    yield _make
    for dq in opened:
        dq.close()
