"""Regressions for what an adversarial review broke: damaged rows, hostile exceptions,
stuck coroutines, a database swapped under a worker, and edge-case options."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import durq
from tests.support.db import execute
from tests.support.procs import ROOT, WorkerProc


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise UnprintableError()


def test_an_exception_whose_str_raises_is_recorded_and_the_worker_goes_on(make_any, drain) -> None:
    app = make_any()

    @app.task(max_attempts=2, backoff=durq.constant(0))
    def nasty() -> None:
        raise UnprintableError()

    @app.task
    def fine() -> str:
        return "ok"

    bad, good = nasty.enqueue(), fine.enqueue()
    drain(app, concurrency=1)
    with pytest.raises(durq.JobFailed):
        bad.wait(1)
    assert [e.message for e in bad.refresh().errors] == ["<UnprintableError: str() failed>"] * 2
    assert good.wait(1) == "ok"


def test_a_damaged_error_history_does_not_stop_finishing_or_reaping(
    make_any, drain, url: str
) -> None:
    app = make_any()

    @app.task(max_attempts=2, backoff=durq.constant(0))
    def flaky() -> None:
        raise ValueError("no")

    @app.task
    def fine() -> str:
        return "ok"

    broken, good = flaky.enqueue(), fine.enqueue()
    execute(url, "UPDATE jobs SET errors = 'not json' WHERE id = ?", (broken.id,))
    drain(app, concurrency=2)
    assert good.wait(1) == "ok"
    with pytest.raises(durq.JobFailed):
        broken.wait(1)
    assert broken.refresh().attempts == 2


@pytest.mark.parametrize("column", ["max_attempts", "priority", "attempts"])
def test_text_in_an_integer_column_stays_bounded(
    make_app, drain, tmp_path: Path, column: str
) -> None:
    """SQLite stores text in an INTEGER column as text; claims and attempt counts cope."""
    app = make_app()

    @app.task(max_attempts=2, backoff=durq.constant(0))
    def flaky() -> None:
        raise ValueError("no")

    @app.task
    def fine() -> str:
        return "ok"

    damaged, good = flaky.enqueue(), fine.enqueue()
    conn = sqlite3.connect(tmp_path / "jobs.db")
    conn.execute(f"UPDATE jobs SET {column} = '2x' WHERE id = ?", (damaged.id,))
    conn.commit()
    conn.close()
    drain(app, concurrency=4)
    assert good.wait(1) == "ok"
    assert app.get(damaged.id).state == "failed"


def test_a_blocking_coroutine_times_out_only_once_it_has_stopped(
    make_any, drain, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 11: the watchdog used to settle it at ~1.3 s while it still ran; now its slot
    and lease are held, and the timeout written, once the body is gone; the block shows."""
    app = make_any()
    ended: list[float] = []

    @app.task(max_attempts=1, timeout=0.3)
    async def blocks() -> str:
        time.sleep(2.5)  # blocks the event loop: neither wait_for nor a cancel can act
        ended.append(time.time())
        return "late"

    job = blocks.enqueue()
    with caplog.at_level(logging.INFO, logger="durq.events"):
        drain(app, timeout=60)
    with pytest.raises(durq.JobFailed):
        job.wait(1)
    job.refresh()
    assert job.errors[0].kind == "timeout" and job.result is None
    assert job.finished_at is not None and job.finished_at >= ended[0]  # after it stopped
    names = [r.getMessage().split(" ", 1)[0] for r in caplog.records]
    assert "loop_blocked" in names and "job_wedged" in names


def test_one_damaged_row_does_not_break_listing(make_app, tmp_path: Path) -> None:
    app = make_app()
    a, b = app.enqueue("t", {}), app.enqueue("t", {})
    conn = sqlite3.connect(tmp_path / "jobs.db")
    conn.execute("UPDATE jobs SET state = 'bogus', run_at = 'soon' WHERE id = ?", (a.id,))
    conn.commit()
    conn.close()
    states = {j.id: j.state for j in app.jobs()}
    assert states == {a.id: "bogus", b.id: "queued"}
    out = subprocess.run(
        [sys.executable, "-m", "durq", "jobs", "list", "--db", str(tmp_path / "jobs.db"), "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_a_database_deleted_under_a_worker_stops_it_with_a_reason(
    tmp_path: Path, db_url: str
) -> None:
    """SQLite would go on writing to the unlinked file, where nobody sees the jobs."""
    app = durq.Durq(db_url)
    job = app.enqueue("echo", {"value": 1})
    w = WorkerProc("tests.apps.basic:dq", db_url, tmp_path / "w.log", ["--lease", "0.6"])
    try:
        assert job.wait(10) == 1
        app.close()
        os.unlink(tmp_path / "jobs.db")
        code = w.wait(10)
    finally:
        w.stop()
    assert code == 1
    crashed = [e for e in w.events() if e["event"] == "worker_crashed"]
    assert "was deleted while durq had it open" in str(crashed[0]["error"])


@pytest.mark.parametrize(
    "options",
    [
        {"priority": True},
        {"priority": 2**63},
        {"max_attempts": 2**63},
        {"max_attempts": True},
        {"delay": True},
        {"delay": 1e12},
        {"run_at": True},
        {"run_at": -5.0},
        {"queue": "q\udc80"},
        {"key": "k\udc80"},
    ],
)
def test_edge_case_options_are_refused_clearly(make_app, options: dict[str, object]) -> None:
    app = make_app()
    with pytest.raises(durq.ConfigError):
        app.enqueue("t", {}, **options)  # type: ignore[arg-type]
    assert app.jobs() == []


def test_payloads_of_the_wrong_shape_are_payload_errors(make_app) -> None:
    app = make_app()
    with pytest.raises(durq.PayloadError, match="dict of keyword arguments"):
        app.enqueue("t", [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(durq.PayloadError, match="meta must be a dict"):
        app.enqueue("t", {}, meta=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(durq.ConfigError):
        app.enqueue("t\udc80", {})
    assert app.jobs() == []


@pytest.mark.parametrize("query", ["?busy_timeout=nan", "?lock_timeout=-5", "?busy_timeout=1e30"])
def test_bad_timeouts_in_the_url_are_refused(tmp_path: Path, query: str) -> None:
    with pytest.raises(durq.ConfigError):
        durq.Durq(f"sqlite:///{tmp_path / 'x.db'}{query}").store  # noqa: B018


def test_read_commands_never_write_durq_tables_into_another_database(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    for verb in (
        ["status"],
        ["jobs", "list"],
        ["jobs", "show", "1"],
        ["retry", "1"],
        ["cancel", "1"],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "durq", *verb, "--db", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 1, verb
        assert "no durq schema" in out.stderr and "durq migrate" in out.stderr
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
    conn.close()
    # migrating it on purpose backs the foreign file up first
    assert (
        subprocess.run(
            [sys.executable, "-m", "durq", "migrate", "--db", str(path)], cwd=ROOT
        ).returncode
        == 0
    )
    assert len(list(tmp_path.glob("app.db.v0-*.bak"))) == 1
