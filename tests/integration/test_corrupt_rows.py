"""A damaged row (edited outside durq, or written by a buggy tool) fails that job at most,
never the worker, the store or the CLI for the other jobs (found by an adversarial pass:
one malformed error-history entry made `durq jobs list` a traceback for every job; a BLOB
payload was retried as transient instead of failing once; a non-numeric created_at in the
newest row stopped the SQLite store from opening at all)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import durq
from tests.support.db import execute


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args], capture_output=True, text=True, timeout=60
    )


def assert_clean(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_a_malformed_error_entry_is_shown_not_raised(make_any, url: str) -> None:
    app = make_any()
    damaged, fine = app.enqueue("echo", {"x": 1}), app.enqueue("echo", {"x": 2})
    entry = [{"attempt": "x", "at": "y", "started_at": "z", "message": "kept"}]
    execute(url, "UPDATE jobs SET errors = ? WHERE id = ?", (json.dumps(entry), damaged.id))
    [error] = app.get(damaged.id).errors
    assert (error.attempt, error.at, error.started_at, error.message) == (0, 0.0, None, "kept")
    listed = cli("jobs", "list", "--db", url, "--json")
    assert_clean(listed)
    assert {j["id"] for j in json.loads(listed.stdout)} == {damaged.id, fine.id}
    for args in (["jobs", "list"], ["jobs", "show", str(damaged.id)]):
        assert_clean(cli(*args, "--db", url))
    shown = cli("jobs", "show", str(damaged.id), "--db", url, "--json")
    assert_clean(shown)
    assert json.loads(shown.stdout)["attempts"][0]["error"] == ": kept"


@pytest.mark.parametrize("blob", [b"\xff\x00\xfe", b'{"x": 1}'], ids=["bytes", "json_bytes"])
def test_a_blob_payload_fails_its_job_once_and_the_rest_run(
    make_app, drain, db_url: str, blob: bytes
) -> None:
    """SQLite keeps any type in any column: a payload stored as a BLOB came back as bytes,
    and the worker retried it as a transient TypeError until its attempts ran out."""
    app = make_app()

    @app.task(max_attempts=5)
    def echo(x: int) -> int:
        return x

    bad, good = echo.enqueue(x=1), echo.enqueue(x=2)
    execute(db_url, "UPDATE jobs SET payload = ? WHERE id = ?", (blob, bad.id))
    for args in (["jobs", "show", str(bad.id)], ["jobs", "show", str(bad.id), "--json"]):
        assert_clean(cli(*args, "--db", db_url))
    assert_clean(cli("jobs", "list", "--db", db_url, "--json"))
    drain(app)
    bad.refresh()
    assert bad.state == "failed" and bad.attempts == 1
    assert bad.errors[0].kind == "undecodable_payload" and "bytes" in bad.errors[0].message
    assert bad.payload == "unreadable: the stored value is bytes, not text"
    assert good.wait(1) == 2


def test_damaged_times_do_not_stop_the_store_or_the_cli(make_app, drain, db_url: str) -> None:
    app = make_app()

    @app.task
    def echo(x: int) -> int:
        return x

    later, newest = echo.enqueue(x=1), echo.enqueue(x=2)
    execute(db_url, "UPDATE jobs SET run_at = 'abc' WHERE id = ?", (later.id,))
    execute(db_url, "UPDATE jobs SET created_at = 'when' WHERE id = ?", (newest.id,))
    app.close()
    reopened = durq.Durq(db_url)  # the store reads the newest row's created_at as it opens
    try:
        assert reopened.get(newest.id).payload == {"x": 2}
        shown = cli("jobs", "show", str(later.id), "--db", db_url)
        assert_clean(shown)
        assert "its run_at is 'abc', not a time: the row is damaged" in shown.stdout
        assert_clean(cli("status", "--db", db_url))
    finally:
        reopened.close()
    # a run_at of 'abc' is never due (SQLite orders text after numbers): out of the way
    execute(db_url, "DELETE FROM jobs WHERE id = ?", (later.id,))
    app2 = durq.Durq(db_url)
    app2.task(echo.fn, name="echo")
    drain(app2)
    assert app2.get(newest.id).result == 2
    app2.close()
