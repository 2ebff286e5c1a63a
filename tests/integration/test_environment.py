"""A bad environment: a full disk, a read-only database, a worker frozen past its lease,
and payloads at the edge of what JSON holds, run by a real worker on both backends."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from durq.payload import MAX_DEPTH
from tests.conftest import IN_CI
from tests.support.procs import ROOT, WorkerProc, wait_for

APP = "tests.apps.basic:dq"


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of the test's own (root only); unmounted afterwards, whatever happens."""
    where = tmp_path / "mnt"
    where.mkdir()
    done = _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where))
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
        if IN_CI:
            pytest.fail(f"{reason} (CI=true: these tests must run, as root)")
        pytest.skip(reason)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path) -> Path:
    """Write a file until the filesystem reports ENOSPC; returns it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == 28, exc  # ENOSPC
    try:
        while True:  # the last few bytes too
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def integrity(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()


def count_rows(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])
    finally:
        conn.close()


def test_a_full_disk_refuses_new_work_corrupts_nothing_and_recovers(
    tmpfs: Path, tmp_path: Path
) -> None:
    db = tmpfs / "jobs.db"
    url = f"sqlite:///{db}"
    app = durq.Durq(url)
    kept = [app.enqueue("echo", {"value": i}, queue="kept") for i in range(20)]  # not served
    w = WorkerProc(APP, url, tmp_path / "w.log", ["--concurrency", "2", "--lease", "5"])
    filler = None
    try:
        running = app.enqueue("long", {"seconds": 1.5})
        wait_for(lambda: running.refresh().state == "running", 15, 0.02, "the long job to start")
        filler = fill(tmpfs)
        rows = count_rows(db)

        with pytest.raises(durq.StoreFull) as info:
            app.enqueue("echo", {"value": "x" * 2000})
        assert str(db) in str(info.value) and "disk full" in str(info.value)
        with pytest.raises(durq.StoreFull):  # keyed and grouped inserts too
            app.enqueue("echo", {"value": 1}, key="k")
        assert count_rows(db) == rows, "a refused enqueue wrote a row"
        out = subprocess.run(
            [sys.executable, "-m", "durq", "enqueue", "echo", "value=1", "--db", str(db)],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert out.returncode == 1 and "disk full" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr

        # the long job ends while the disk is full: its finish cannot commit and is retried
        def finish_refused() -> bool:
            return any(
                e["event"] == "store_busy"
                and "disk full" in str(e.get("error"))
                and e.get("reason") == "full"  # not the busy lock its name suggests
                for e in w.events()
            )

        wait_for(finish_refused, 15, 0.05, "the worker to report its finish refused")
        assert w.proc.poll() is None, "the worker died on a full disk"
        assert integrity(db) == [("ok",)]

        filler.unlink()
        filler = None
        assert running.wait(20) == "done"
        assert w.proc.poll() is None
        again = app.enqueue("echo", {"value": 7})
        assert again.wait(20) == 7
    finally:
        w.stop()
        app.close()
        if filler is not None:
            filler.unlink()
    assert integrity(db) == [("ok",)]
    after = durq.Durq(url)
    try:
        for i, job in enumerate(kept):
            row = after.get(job.id)
            assert (row.state, row.payload, row.attempts) == ("queued", {"value": i}, 0)
        assert after.get(running.id).attempts == 1  # finished by its own worker, not re-run
    finally:
        after.close()


def test_a_read_only_database_reads_and_refuses_writes_clearly(tmpfs: Path) -> None:
    db = tmpfs / "jobs.db"
    app = durq.Durq(str(db))
    jobs = [app.enqueue("echo", {"value": i}) for i in range(5)]
    app.cancel(jobs[0].id)
    app.close()
    before = db.read_bytes()
    remounted = _mount("-o", "remount,ro", str(tmpfs))
    assert remounted.returncode == 0, remounted.stderr
    try:

        def cli(*verb: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "durq", *verb, "--db", str(db)],
                capture_output=True, text=True, cwd=ROOT, timeout=60,
            )  # fmt: skip

        for verb in (["status", "--json"], ["jobs", "list", "--json"], ["jobs", "show", "2"]):
            out = cli(*verb)
            assert out.returncode == 0, (verb, out.stderr)
        assert '"queued": 4' in cli("status", "--json").stdout.replace("\n", "")
        for verb in (["enqueue", "echo", "value=1"], ["cancel", "2"], ["retry", "1"]):
            out = cli(*verb)
            assert out.returncode == 1, verb
            assert "read-only" in out.stderr and str(db) in out.stderr, out.stderr
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1

        ro = durq.Durq(str(db))
        try:
            assert [j.payload for j in ro.jobs()] == [{"value": i} for i in reversed(range(5))]
            with pytest.raises(durq.StoreReadOnly, match="read-only"):
                ro.enqueue("echo", {"value": 9})
            with pytest.raises(durq.StoreReadOnly):
                ro.cancel(jobs[1].id)
        finally:
            ro.close()
    finally:
        _mount("-o", "remount,rw", str(tmpfs))
    assert db.read_bytes() == before
    assert integrity(db) == [("ok",)]
    writable = durq.Durq(str(db))
    try:
        assert writable.cancel(jobs[1].id).state == "cancelled"  # writable again
    finally:
        writable.close()


def test_a_worker_frozen_past_its_lease_has_every_job_rescued_and_its_late_results_fenced(
    tmp_path: Path, url: str
) -> None:
    """Case 02 with several jobs: A holds three when it is SIGSTOPped for 3 leases; B reaps
    and runs all three; after SIGCONT each of A's three is rejected by its token or stopped
    by A's heartbeat (lease_lost) before it could finish."""
    app = durq.Durq(url)
    args = ["--concurrency", "3", "--lease", "1", "--heartbeat", "0.25"]
    a = WorkerProc(APP, url, tmp_path / "a.log", [*args, "--worker-id", "A"], {"WORKER_NAME": "A"})
    b = None
    try:
        held = [app.enqueue("whoami", {"ms": 800}) for _ in range(3)]
        wait_for(
            lambda: all(app.get(j.id).worker_id == "A" for j in held), 15, 0.005, "A to hold all"
        )
        a.signal(signal.SIGSTOP)
        stopped = time.monotonic()
        b = WorkerProc(APP, url, tmp_path / "b.log", [*args, "--worker-id", "B"])
        for j in held:
            j.wait(15)
        time.sleep(max(0.0, 3.0 - (time.monotonic() - stopped)))
        a.signal(signal.SIGCONT)

        def fenced() -> set[int]:
            """A's bodies whose late finish was refused by its token, or that A's heartbeat
            stopped first (interrupted as lease_lost: their outcome dropped)."""
            return {
                int(str(e["id"]))
                for e in a.events()
                if (e["event"] == "stale_outcome" and e.get("outcome") == "succeeded")
                or (e["event"] == "job_interrupted" and e.get("reason") == "lease_lost")
            }

        wait_for(lambda: fenced() == {j.id for j in held}, 15, 0.05, "A's three late ends")
        for j in held:
            row = app.get(j.id)
            assert (row.state, row.worker_id, row.attempts) == ("succeeded", "B", 2)
            assert row.result != "A"
            assert [e.kind for e in row.errors] == ["lease_lost"]
        assert a.proc.poll() is None and b.proc.poll() is None  # A goes on working
    finally:
        a.signal(signal.SIGCONT)
        a.stop()
        if b is not None:
            b.stop()
        app.close()


HARD_PAYLOADS: list[dict[str, Any]] = [
    {"value": "\x00 nul, \udc80 lone surrogate, \U0001f600 astral"},
    {"value": {"\x00key": [1, (2, 3)], "\udfff": None}},
    {"value": [10**4299, -(2**200), -0.0, 1e308, 5e-324, True]},
    {"value": "x" * (1 << 19)},  # half a MiB
]


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def test_edge_payloads_reach_the_task_exactly_on_both_backends(tmp_path: Path, url: str) -> None:
    """What enqueue accepts, a real worker process decodes and runs: the task gets the
    payload back exactly (tuples as lists) and its result stores it again."""
    app = durq.Durq(url)
    try:
        payloads = [*HARD_PAYLOADS, {"value": _deep(MAX_DEPTH - 1)}]
        jobs = [app.enqueue("echo", p) for p in payloads]
        with pytest.raises(durq.PayloadError, match="nests deeper"):
            app.enqueue("echo", {"value": _deep(MAX_DEPTH + 1)})
        with pytest.raises(durq.PayloadError, match="not JSON-serialisable"):
            app.enqueue("echo", {"value": math.nan})
        w = WorkerProc(APP, url, tmp_path / "w.log", ["--concurrency", "2", "--lease", "5"])
        try:
            results = [j.wait(30) for j in jobs]
        finally:
            w.stop()
        want = [
            HARD_PAYLOADS[0]["value"],
            {"\x00key": [1, [2, 3]], "\udfff": None},
            HARD_PAYLOADS[2]["value"],
            HARD_PAYLOADS[3]["value"],
            _deep(MAX_DEPTH - 1),
        ]
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(10_000)  # comparing 500-deep lists recurses
        try:
            assert results == want
        finally:
            sys.setrecursionlimit(old)
    finally:
        app.close()
