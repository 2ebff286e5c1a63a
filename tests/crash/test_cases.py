"""Failures reported against other job queues (../shared/cases/), driven through durq."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT, WorkerProc, wait_for

pytestmark = pytest.mark.slow

APP = "tests.apps.basic:dq"


def starts(runs_file: Path) -> Counter[int]:
    found: Counter[int] = Counter()
    if runs_file.exists():
        for line in runs_file.read_text().splitlines():
            kind, job_id, _attempt, _pid = line.split()
            if kind == "start":
                found[int(job_id)] += 1
    return found


def lost_lease_events(w: WorkerProc) -> list[dict[str, object]]:
    """The worker's events that say it lost a lease: its outcome refused (``stale_outcome``),
    its heartbeat's ``lease_lost``, or its body stopped for it (``job_interrupted``)."""
    return [
        e for e in w.events()
        if e["event"] in ("stale_outcome", "lease_lost")
        or (e["event"] == "job_interrupted" and e.get("reason") == "lease_lost")
    ]  # fmt: skip


def freeze_outside_the_write_lock(w: WorkerProc, url: str) -> None:
    """SIGSTOP ``w`` at a moment it holds no SQLite write lock: frozen inside a write
    transaction (a heartbeat's, a claim's) it would block every writer of the file until
    SIGCONT, the other worker's start included (SQLite has one writer; docs/guarantees.md,
    known limits). PostgreSQL has row locks only: one SIGSTOP. Retries while A is inside a
    write (a few ms each), so the freeze still lands while A holds J."""
    if not url.startswith("sqlite"):
        w.signal(signal.SIGSTOP)
        return
    path = url.removeprefix("sqlite:///").split("?")[0]
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        for _ in range(200):
            w.signal(signal.SIGSTOP)
            time.sleep(0.005)  # the stop is delivered
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                return
            except sqlite3.OperationalError:  # A holds the lock: let it finish, try again
                w.signal(signal.SIGCONT)
                time.sleep(0.003)
        raise AssertionError("A held the write lock at 200 freezes in a row")
    finally:
        probe.close()


def test_case_02_a_frozen_worker_cannot_complete_a_job_it_lost(tmp_path: Path, url: str) -> None:
    """Case 02 part A: SIGSTOP past the lease; the other worker re-leases and completes; the
    resumed worker's completion is fenced out and it keeps working."""
    app = durq.Durq(url)
    args = ["--concurrency", "1", "--lease", "1", "--heartbeat", "0.25"]
    a = WorkerProc(APP, url, tmp_path / "a.log", [*args, "--worker-id", "A"], {"WORKER_NAME": "A"})
    b = None
    try:
        j = app.enqueue("whoami", {"ms": 300})
        wait_for(lambda: app.get(j.id).worker_id == "A", 10, 0.005, "A to lease J")
        freeze_outside_the_write_lock(a, url)
        stopped = time.monotonic()
        b = WorkerProc(
            APP, url, tmp_path / "b.log", [*args, "--worker-id", "B"], {"WORKER_NAME": "B"}
        )
        # B's start (a Python child importing the app) may take seconds on a loaded machine
        wait_for(lambda: any(e.get("event") == "worker_started" for e in b.events()), 60, 0.02,
                 "B to start")  # fmt: skip
        assert j.wait(10) == "B"
        time.sleep(max(0.0, 2.5 - (time.monotonic() - stopped)))
        a.signal(signal.SIGCONT)
        # A finishes its copy and tries to complete with its old token (or its heartbeat
        # or cancel watch finds the lease gone first): either way it says so
        wait_for(lambda: lost_lease_events(a), 30, 0.05, "A to notice its lost lease")
        row = app.get(j.id)
        assert (row.state, row.result, row.attempts) == ("succeeded", "B", 2)
        assert [e.kind for e in row.errors] == ["lease_lost"]
        k = app.enqueue("whoami", {"ms": 10})
        assert k.wait(10) in ("A", "B")
        assert a.proc.poll() is None and b.proc.poll() is None
    finally:
        a.signal(signal.SIGCONT)
        a.stop()
        if b is not None:
            b.stop()
    assert lost_lease_events(a), "A should log that its lease was lost"
    assert app.get(j.id).result == "B"


def test_case_02_heartbeats_keep_a_long_job_owned(tmp_path: Path, url: str) -> None:
    """Case 02 part B: a 5 s job under a 1 s lease runs exactly once."""
    runs = tmp_path / "runs.txt"
    app = durq.Durq(url)
    args = ["--concurrency", "1", "--lease", "1", "--heartbeat", "0.25"]
    env = {"RUNS_FILE": str(runs)}
    with_procs = [WorkerProc(APP, url, tmp_path / f"{n}.log", args, env) for n in "AB"]
    try:
        job = app.enqueue("whoami", {"ms": 5000})
        job.wait(15)
    finally:
        for p in with_procs:
            p.stop()
    assert starts(runs) == {job.id: 1}
    assert job.refresh().attempts == 1


PRODUCER = """
import sys, threading, time, durq
app = durq.Durq(sys.argv[1])
lat, errors = [], []
def produce():
    for i in range(500):
        t = time.perf_counter()
        try:
            app.enqueue("sleepy", {"ms": 0})
        except Exception as exc:
            errors.append(repr(exc))
        lat.append(time.perf_counter() - t)
threads = [threading.Thread(target=produce) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
lat.sort()
print(len(errors), round(lat[int(len(lat) * 0.99)] * 1000, 1), flush=True)
"""

READER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
while True:
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM jobs").fetchone()
    time.sleep(2)
    conn.execute("COMMIT")
    time.sleep(1)
"""


def test_case_06_busy_database_loses_nothing_and_runs_each_job_once(
    tmp_path: Path, db_url: str
) -> None:
    """Case 06: 2 producer processes x 4 threads x 500 jobs, 4 workers x 4, a reader holding
    read transactions; no enqueue fails, every job runs exactly once."""
    runs = tmp_path / "runs.txt"
    app = durq.Durq(db_url)
    app.store.migrate()
    path = str(tmp_path / "jobs.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reader = subprocess.Popen([sys.executable, "-c", READER, path], env=env)
    args = ["--concurrency", "4", "--lease", "2", "--heartbeat", "0.25"]
    workers = [
        WorkerProc(APP, db_url, tmp_path / f"w{i}.log", args, {"RUNS_FILE": str(runs)})
        for i in range(4)
    ]
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCER, db_url], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=120)[0].split() for p in producers]
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=5000)) == 4000,
            60,
            0.2,
            "4000 jobs to succeed",
        )
        assert all(w.proc.poll() is None for w in workers)
    finally:
        for p in producers:
            p.kill()
            p.wait()
        reader.kill()
        reader.wait()
        for w in workers:
            w.stop()
    assert [o[0] for o in outs] == ["0", "0"], outs  # no enqueue raised
    counted = starts(runs)
    assert len(counted) == 4000 and set(counted.values()) == {1}
    assert app.jobs(state="running") == [] and app.jobs(state="failed") == []
    print("p99 enqueue latency (ms) per producer:", [o[1] for o in outs])


def test_case_10_sigterm_lets_running_jobs_finish_within_grace(tmp_path: Path, url: str) -> None:
    """Case 10 main: grace 10 s, 8 jobs of 3 s, concurrency 4, SIGTERM at t=1 s."""
    app = durq.Durq(url)
    jobs = [app.enqueue("long", {"seconds": 3}) for _ in range(8)]
    w = WorkerProc(APP, url, tmp_path / "w.log", ["--concurrency", "4", "--grace", "10"])
    try:
        wait_for(lambda: len(app.jobs(state="running")) == 4, 10, what="4 running")
        time.sleep(1)
        w.signal(signal.SIGTERM)
        assert w.wait(15) == 0
    finally:
        w.stop()
    states = Counter((app.get(j.id).state, app.get(j.id).attempts) for j in jobs)
    assert states == {("succeeded", 1): 4, ("queued", 0): 4}
    w2 = WorkerProc(APP, url, tmp_path / "w2.log", ["--concurrency", "4"])
    try:
        for j in jobs:
            assert j.wait(15) == "done"
    finally:
        w2.stop()


def test_case_10_killed_during_grace_the_other_worker_takes_over_quickly(
    tmp_path: Path, url: str
) -> None:
    """Case 10 variant C: SIGTERM, then SIGKILL 1 s later; lease 2 s; the second worker
    recovers the jobs within lease + sweep."""
    app = durq.Durq(url)
    args = ["--concurrency", "4", "--lease", "2", "--grace", "10"]
    victim = WorkerProc(APP, url, tmp_path / "v.log", [*args, "--worker-id", "victim"])
    other = None
    try:
        jobs = [app.enqueue("long", {"seconds": 3}) for _ in range(4)]
        wait_for(lambda: len(app.jobs(state="running")) == 4, 10, what="4 running")
        other = WorkerProc(APP, url, tmp_path / "o.log", [*args, "--worker-id", "other"])
        victim.signal(signal.SIGTERM)
        time.sleep(1)
        victim.kill()
        killed = time.monotonic()
        wait_for(
            lambda: all(app.get(j.id).worker_id == "other" for j in jobs),
            10,
            0.05,
            "the other worker to take over",
        )
        assert time.monotonic() - killed <= 3.5
        for j in jobs:
            assert j.wait(10) == "done"
    finally:
        victim.stop()
        if other is not None:
            other.stop()
