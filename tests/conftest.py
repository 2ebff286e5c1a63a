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


# -- PostgreSQL ---------------------------------------------------------------------------

PG_URL = os.environ.get("DURQ_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
_pg_state: dict[str, str | None] = {}


def pg_unavailable() -> str | None:
    """None when the test server answers, else why not (checked once per session)."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["reason"] = None
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _pg_state["reason"] = f"PostgreSQL not reachable at {PG_URL}: {first}"
    return _pg_state["reason"]


def require_pg() -> None:
    """Skip (locally) or fail (under CI=true) when the PostgreSQL server is absent."""
    reason = pg_unavailable()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: PostgreSQL tests must run)")
    pytest.skip(reason)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL with a fresh schema of its own; the schema is dropped afterwards."""
    require_pg()
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each backend: the worker and crash tests run on both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def make_any(url: str) -> Iterator[Callable[..., durq.Durq]]:
    """Like ``make_app``, on the parametrised backend ``url``."""
    apps: list[durq.Durq] = []

    def make(**kwargs: object) -> durq.Durq:
        app = durq.Durq(url, **kwargs)  # type: ignore[arg-type]
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture(autouse=True)
def close_every_durq(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every Durq a test opened, so that no connection pool outlives its test (a
    PostgreSQL pool collected later, on one of its own threads, warns and fails the run)."""
    opened: list[durq.Durq] = []
    original = durq.Durq.__init__

    def recording_init(self: durq.Durq, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        opened.append(self)

    monkeypatch.setattr(durq.Durq, "__init__", recording_init)
    yield
    for app in opened:
        app.close()
