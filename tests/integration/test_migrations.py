"""Schema migrations: numbered, recorded in PRAGMA user_version, backed up, refused when newer."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from durq.store.sqlite.connection import migration_files, split_statements
from tests.support.procs import ROOT

LATEST = migration_files()[-1][0]


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            ).fetchall()
        )
    finally:
        conn.close()


def build_at(path: Path, version: int) -> None:
    """Apply the shipped migrations up to ``version`` by hand, as an older durq would have."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number, _name, sql in migration_files():
        if number <= version:
            for statement in split_statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
    conn.close()


def test_new_database_gets_the_latest_schema_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    durq.Durq(str(path)).enqueue("t", {})
    assert user_version(path) == LATEST >= 2
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_migrating_an_older_database_backs_it_up_first(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    build_at(path, 1)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO jobs (queue, task, payload, run_at, max_attempts, state, created_at) "
        "VALUES ('default', 'old', '{}', 0, 3, 'queued', 0)"
    )
    conn.commit()
    conn.close()
    app = durq.Durq(str(path))
    assert [j.task for j in app.jobs()] == ["old"]
    assert user_version(path) == LATEST
    backups = list(tmp_path.glob("jobs.db.v1-*.bak"))
    assert len(backups) == 1
    assert user_version(backups[0]) == 1
    b = sqlite3.connect(backups[0])
    assert b.execute("SELECT task FROM jobs").fetchall() == [("old",)]
    b.close()


def test_migrated_chain_equals_a_fresh_schema(tmp_path: Path) -> None:
    fresh, chained = tmp_path / "fresh.db", tmp_path / "chained.db"
    durq.Durq(str(fresh)).store.migrate()
    build_at(chained, 1)
    durq.Durq(str(chained)).store.migrate()
    assert schema(fresh) == schema(chained)


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    durq.Durq(str(path)).enqueue("t", {})
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST + 5}")
    conn.commit()
    conn.close()
    before = schema(path)
    with pytest.raises(durq.SchemaTooNew, match=f"schema v{LATEST + 5}"):
        durq.Durq(str(path)).enqueue("t", {})
    for verb in (["migrate"], ["status"], ["jobs", "list"]):
        out = subprocess.run(
            [sys.executable, "-m", "durq", *verb, "--db", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 1, verb
        assert "upgrade durq" in out.stderr
    assert schema(path) == before
    assert user_version(path) == LATEST + 5
    assert list(tmp_path.glob("*.bak")) == []


@pytest.mark.parametrize(
    ("query", "expected"), [("", 2), ("?synchronous=normal", 1), ("?synchronous=FULL", 2)]
)
def test_synchronous_is_full_unless_asked(tmp_path: Path, query: str, expected: int) -> None:
    app = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}{query}")
    conn = app.store._conn()  # type: ignore[attr-defined]
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == expected
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


@pytest.mark.parametrize(
    "url", ["sqlite:///x.db?synchronous=off", "sqlite:///x.db?color=red", "sqlite:///:memory:"]
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(durq.ConfigError):
        durq.Durq(url).store  # noqa: B018
