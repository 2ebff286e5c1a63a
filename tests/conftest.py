"""Shared fixtures: a fresh SQLite database per test, and PostgreSQL policy.

Tests needing a server skip with a one-line reason when it is absent, except under
``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durq

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


class Clock:
    """A clock tests move by hand (seconds since the epoch)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_app(db_url: str) -> Iterator[Callable[..., durq.Durq]]:
    apps: list[durq.Durq] = []

    def make(url: str | None = None, **kwargs: object) -> durq.Durq:
        app = durq.Durq(url or db_url, **kwargs)  # type: ignore[arg-type]
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
