"""Bad input and a bad environment get a clear error and lose nothing."""

from __future__ import annotations

import math
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT


def count_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize(
    "payload",
    [
        {"when": object()},
        {"s": {1, 2}},
        {"b": b"bytes"},
        {"x": math.nan},
        {"x": math.inf},
        {1: "int key"},
    ],
    ids=["object", "set", "bytes", "nan", "inf", "int-key"],
)
def test_non_json_payload_raises_type_error_and_stores_nothing(
    make_app, tmp_path: Path, payload
) -> None:
    app = make_app()
    app.enqueue("warmup", {})  # creates the schema
    with pytest.raises(TypeError, match="payload"):
        app.enqueue("t", payload)
    assert count_rows(tmp_path / "jobs.db") == 1


def test_payload_over_the_limit_is_refused(make_app, tmp_path: Path) -> None:
    app = make_app()

    @app.task
    def big(blob: str) -> None: ...

    big.enqueue(blob="x" * 1000)
    with pytest.raises(durq.PayloadTooLarge, match="over the limit of 1048576 bytes"):
        big.enqueue(blob="x" * (1 << 20))
    small = make_app(payload_limit=100)
    with pytest.raises(TypeError):
        small.enqueue("big", {"blob": "x" * 200})
    assert count_rows(tmp_path / "jobs.db") == 1


def test_bad_options_are_refused_before_anything_is_written(make_app, tmp_path: Path) -> None:
    from datetime import datetime

    app = make_app()
    app.enqueue("warmup", {})
    for kwargs in (
        {"delay": -1},
        {"delay": math.nan},
        {"max_attempts": 0},
        {"run_at": datetime(2030, 1, 1)},
        {"delay": 1, "run_at": 5.0},
        {"queue": ""},
        {"key": ""},
    ):
        with pytest.raises(durq.ConfigError):
            app.enqueue("t", {}, **kwargs)
    with pytest.raises(TypeError):
        app.enqueue("t", {}, color="red")  # type: ignore[call-arg]
    assert count_rows(tmp_path / "jobs.db") == 1


def test_a_job_that_would_expire_before_it_is_due_is_refused(make_app, tmp_path: Path) -> None:
    app = make_app()

    @app.task(deadline_in=60)
    def report() -> None:
        return None

    app.enqueue("warmup", {})
    now = time.time()
    refused = (
        report.options(delay=120),  # the task's deadline_in
        report.options(delay=30, deadline_in=1),
        report.options(run_at=now + 600, deadline=now + 300),
        report.options(delay=30, deadline=now + 10),
    )
    for bound in refused:
        with pytest.raises(durq.ConfigError, match="would expire before it is due"):
            bound.enqueue()
    assert count_rows(tmp_path / "jobs.db") == 1
    # due before the deadline, or due now (one past its deadline expires at once): kept
    report.options(delay=30).enqueue()
    report.options(deadline=now - 5).enqueue()
    report.options(run_at=now + 5, deadline=now + 300).enqueue()
    assert count_rows(tmp_path / "jobs.db") == 4


def test_surrogates_and_deep_unicode_round_trip(make_app, drain) -> None:
    app = make_app()

    @app.task
    def echo(text: str, nested: list[object]) -> object:
        return {"text": text, "nested": nested}

    payload = {"text": "h\udc80llo ✓ 中文", "nested": [[[["deep"]]]]}
    job = echo.enqueue(**payload)
    drain(app)
    assert job.wait(1) == payload


def test_a_file_that_is_not_sqlite_gives_a_clear_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"this is a text file, not a database\n" * 100)
    app = durq.Durq(str(path))
    with pytest.raises(durq.StoreError, match=r"notes\.db is not a SQLite database"):
        app.enqueue("t", {})
    assert path.read_bytes().startswith(b"this is a text file")
    cli = subprocess.run(
        [sys.executable, "-m", "durq", "status", "--db", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert cli.returncode == 1
    assert "notes.db is not a SQLite database" in cli.stderr


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://[::1", "malformed PostgreSQL URL: Invalid IPv6 URL"),
        ("postgres://app:s3cret@[::1/jobs", "malformed PostgreSQL URL: Invalid IPv6 URL"),
        ("sqlite://[::1/jobs.db", "malformed SQLite URL 'sqlite://[::1/jobs.db': Invalid IPv6 URL"),
        (  # urlsplit dropped "#frag.db": the file "rel" was used without a word
            "sqlite:///rel#frag.db",
            "'#' in SQLite URL 'sqlite:///rel#frag.db' starts a URL fragment, so the path "
            "would end before it; write it as %23 (or give a bare file path)",
        ),
        (  # one slash: urlsplit read it as the absolute /jobs2.db at the filesystem root
            "sqlite:/jobs2.db",
            "one slash in 'sqlite:/jobs2.db': did you mean sqlite:///jobs2.db (three slashes "
            "for a path relative to the current directory, four for an absolute one: "
            "sqlite:////jobs2.db)?",
        ),
    ],
    ids=["postgres", "postgres-password", "sqlite", "sqlite-fragment", "sqlite-one-slash"],
)
@pytest.mark.parametrize("verb", [["status"], ["verify", "--jobs", "5"]])
def test_a_malformed_url_is_one_clear_line_without_its_password(
    url: str, error: str, verb: list[str], tmp_path: Path
) -> None:
    if url.startswith("postgres"):
        pytest.importorskip("psycopg")
    with pytest.raises(durq.ConfigError, match=re.escape(error)):
        durq.Durq(url).jobs()
    cli = subprocess.run(
        [sys.executable, "-m", "durq", *verb, "--db", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert cli.returncode == 1, cli.stderr
    assert cli.stderr == f"durq: error: {error}\n"
    assert "s3cret" not in cli.stdout + cli.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_missing_directory_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(durq.StoreError, match="does not exist"):
        durq.Durq(str(tmp_path / "nope" / "jobs.db")).enqueue("t", {})


HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def test_another_process_holding_the_write_lock_delays_work_but_loses_nothing(
    make_app, tmp_path: Path
) -> None:
    """Case 06 (in part): a writer holding the lock for 2 s; enqueues wait, none fails."""
    app = make_app()

    @app.task
    def echo(n: int) -> int:
        return n

    before = [echo.enqueue(n=i) for i in range(10)]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "jobs.db"), "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    w = app.worker(lease=5)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        t.start()
        started = time.monotonic()
        during = [echo.enqueue(n=100 + i) for i in range(10)]
        waited = time.monotonic() - started
        assert waited >= 1.0, waited  # the first enqueue waited for the lock
        results = [j.wait(10) for j in before + during]
    finally:
        holder.kill()
        holder.communicate()
        w.request_stop()
        t.join(10)
    assert results == list(range(10)) + [100 + i for i in range(10)]
    assert all(j.refresh().attempts == 1 for j in before + during)


READ_JOB = """
import sys, durq
job = durq.Durq(sys.argv[1]).get(int(sys.argv[2]))
print(job.state, job.payload["n"])
"""


def test_a_committed_enqueue_is_visible_from_another_process(make_app, db_url: str) -> None:
    app = make_app()
    job = app.enqueue("anything", {"n": 41})
    out = subprocess.run(
        [sys.executable, "-c", READ_JOB, db_url, str(job.id)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert out.stdout.split() == ["queued", "41"]


RACE_KEYS = """
import sys, durq
app = durq.Durq(sys.argv[1])
ids = [app.enqueue("t", {"i": i}, key=f"k{i}").id for i in range(200)]
print(",".join(map(str, ids)))
"""


def test_two_processes_racing_on_the_same_keys_get_the_same_jobs(make_app, db_url: str) -> None:
    make_app().enqueue("warmup", {})
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE_KEYS, db_url], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]
    assert len(set(outs[0].split(","))) == 200
    assert len(make_app().jobs(limit=1000)) == 201


def test_enqueue_async_runs_off_the_loop(make_app) -> None:
    import asyncio

    app = make_app()

    @app.task
    def t(n: int) -> int:
        return n

    async def produce() -> tuple[durq.Job, durq.Job, durq.Job]:
        loop_thread = threading.get_ident()
        seen: list[int] = []
        orig = app.store.enqueue

        def spy(jobs, connection=None):  # records which thread wrote: not the event loop's
            seen.append(threading.get_ident())
            return orig(jobs, connection=connection)

        app.store.enqueue = spy  # type: ignore[method-assign]
        try:
            a = await t.enqueue_async(n=3)
            b = await t.options(key="k").enqueue_async(n=4)
            c = await t.options(key="k").enqueue_async(n=5)
        finally:
            del app.store.enqueue
        assert seen and loop_thread not in seen
        return a, b, c

    a, b, c = asyncio.run(produce())
    assert app.get(a.id).payload == {"n": 3}
    assert b.id == c.id and app.get(b.id).payload == {"n": 4}
