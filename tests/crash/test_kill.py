"""Real worker processes killed with SIGKILL: no job is lost, duplicates stay in the window."""

from __future__ import annotations

import random
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

import durq
from durq.worker.prefetch import default_depth
from tests.support.procs import WorkerProc, wait_for

pytestmark = pytest.mark.slow

CONCURRENCY = 4
PREFETCH = default_depth(CONCURRENCY)  # the worker's default: jobs claimed ahead of its free slots


def parse_runs(path: Path) -> list[tuple[str, int, int, int]]:
    runs = []
    for line in path.read_text().splitlines():
        kind, job_id, attempt, pid = line.split()
        runs.append((kind, int(job_id), int(attempt), int(pid)))
    return runs


def test_sigkill_three_times_loses_nothing_and_duplicates_were_in_flight(
    tmp_path: Path, url: str
) -> None:
    """Cases 01 and 04: a killed worker's jobs are recovered by lease expiry and run again."""
    rng = random.Random(20261130)
    runs_file = tmp_path / "runs.txt"
    app = durq.Durq(url)
    jobs = [app.enqueue("sleepy", {"ms": rng.uniform(5, 20)}, max_attempts=10) for _ in range(500)]
    args = ["--concurrency", str(CONCURRENCY), "--lease", "1.5", "--grace", "1"]
    env = {"RUNS_FILE": str(runs_file)}
    stable = WorkerProc("tests.apps.basic:dq", url, tmp_path / "stable.log", args, env)
    victim = WorkerProc("tests.apps.basic:dq", url, tmp_path / "victim-0.log", args, env)
    killed: set[int] = set()
    procs = [stable, victim]
    try:
        for n in range(3):
            time.sleep(rng.uniform(0.3, 0.9))
            killed.add(victim.pid)
            victim.kill()
            victim = WorkerProc(
                "tests.apps.basic:dq", url, tmp_path / f"victim-{n + 1}.log", args, env
            )
            procs.append(victim)

        def all_done() -> bool:
            return len(app.jobs(state="succeeded", limit=1000)) == 500

        wait_for(all_done, 90, 0.2, "all 500 jobs to succeed")
    finally:
        for p in procs:
            p.stop()

    assert len(app.jobs(limit=10_000)) == 500
    assert all(app.get(j.id).state == "succeeded" for j in jobs)
    runs = parse_runs(runs_file)
    starts: dict[int, list[int]] = defaultdict(list)
    for kind, job_id, _attempt, pid in runs:
        if kind == "start":
            starts[job_id].append(pid)
    assert set(starts) == {j.id for j in jobs}
    duplicated_by_pid: dict[int, int] = defaultdict(int)
    for job_id, pids in starts.items():
        survivors = [p for p in pids if p not in killed]
        # at most one run outside the killed processes; every extra run began in a killed one
        assert len(survivors) <= 1, (job_id, pids)
        if len(pids) > 1:
            for pid in set(pids) & killed:
                duplicated_by_pid[pid] += 1
    # a killed worker held at most its slots plus its prefetch (started or not, awaiting
    # their commit or not): only those can run again
    held = CONCURRENCY + PREFETCH
    assert all(n <= held for n in duplicated_by_pid.values()), duplicated_by_pid
    assert sum(len(p) for p in starts.values()) - 500 <= 3 * held


def run_with_restarts(app: durq.Durq, url: str, log: Path, args: list[str], done: object) -> int:
    """Keep one worker running (restart it whenever it dies) until ``done()``; return restarts."""
    assert callable(done)
    restarts = 0
    proc = WorkerProc("tests.apps.basic:dq", url, log, args)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not done():
            if proc.proc.poll() is not None:
                restarts += 1
                proc.stop()
                proc = WorkerProc("tests.apps.basic:dq", url, log, args)
            time.sleep(0.05)
    finally:
        proc.stop()
    return restarts


def test_poison_job_that_kills_its_worker_ends_failed_after_max_attempts(
    tmp_path: Path, url: str
) -> None:
    """Case 11: a job that crashes its worker every time is bounded by max_attempts."""
    app = durq.Durq(url)
    poison = app.enqueue("die", {}, max_attempts=3)
    normal = [app.enqueue("echo", {"value": i}) for i in range(20)]

    def settled() -> bool:
        return app.get(poison.id).state == "failed" and all(
            app.get(j.id).state == "succeeded" for j in normal
        )

    restarts = run_with_restarts(
        app, url, tmp_path / "w.log", ["--concurrency", "1", "--lease", "0.5"], settled
    )
    dead = app.get(poison.id)
    assert dead.state == "failed" and dead.attempts == 3
    assert [e.kind for e in dead.errors] == ["lease_lost"] * 3
    # returned by the reaper (lease expired) or, sooner, by the rescue (its pid is gone)
    message = dead.errors[0].message
    assert "stopped heartbeating" in message or "found dead" in message, message
    assert dead.payload == {}
    assert restarts == 3
    assert [app.get(j.id).state for j in normal] == ["succeeded"] * 20
    # a manual retry gives it a fresh budget, and three more deaths fail it again
    assert app.retry(poison.id).attempts == 0
    restarts = run_with_restarts(
        app,
        url,
        tmp_path / "w2.log",
        ["--concurrency", "1", "--lease", "0.5"],
        lambda: app.get(poison.id).state == "failed",
    )
    again = app.get(poison.id)
    assert (again.state, again.attempts, restarts) == ("failed", 3, 3)
    assert len(again.errors) == 7  # 3 lost, the replay's entry, 3 lost
    assert [e.kind for e in again.errors][3] == "replayed"


def test_jobs_sharing_a_crashed_process_are_charged_and_never_lost(
    tmp_path: Path, url: str
) -> None:
    """Case 11 variant: a lost lease costs every job in the dead process an attempt (documented);
    each ends succeeded or failed with a lease_lost history, none lost or left running."""
    app = durq.Durq(url)
    poison = app.enqueue("die", {}, max_attempts=3)
    normal = [app.enqueue("echo", {"value": i}) for i in range(20)]

    def settled() -> bool:
        return all(app.get(j.id).state in ("succeeded", "failed") for j in [poison, *normal])

    run_with_restarts(
        app, url, tmp_path / "w.log", ["--concurrency", "2", "--lease", "0.5"], settled
    )
    assert app.get(poison.id).state == "failed"
    for j in normal:
        row = app.get(j.id)
        assert row.state in ("succeeded", "failed")
        if row.state == "failed":
            assert [e.kind for e in row.errors] == ["lease_lost"] * 3
    assert app.jobs(state="running") == [] and app.jobs(state="queued") == []


def test_sigterm_gives_jobs_back_without_charging_until_the_third_time(
    tmp_path: Path, url: str
) -> None:
    """Case 10 variant B and DESIGN §4: grace, free requeues, exit 0."""
    app = durq.Durq(url)
    jobs = [app.enqueue("long", {"seconds": 30}) for _ in range(4)]
    args = ["--concurrency", "4", "--grace", "1", "--lease", "30"]
    expected_attempts = [0, 0, 1]
    runs = tmp_path / "runs.txt"
    for cycle, attempts in enumerate(expected_attempts):
        proc = WorkerProc(
            "tests.apps.basic:dq", url, tmp_path / f"w{cycle}.log", args, {"RUNS_FILE": str(runs)}
        )
        try:
            # started, not only claimed: a claimed job that has not started yet is given back
            # without a charge (it never ran; docs/features/performance.md)
            wait_for(
                lambda cycle=cycle: (
                    runs.exists() and runs.read_text().count("start") == 4 * (cycle + 1)
                ),
                15,
                what="4 started jobs",
            )
            sent = time.monotonic()
            proc.signal(signal.SIGTERM)
            code = proc.wait(10)
            took = time.monotonic() - sent
        finally:
            proc.stop()
        assert code == 0
        assert took < 3.0, took
        for j in jobs:
            row = app.get(j.id)
            assert (row.state, row.attempts) == ("queued", attempts), (cycle, row)
    events = [e["event"] for e in WorkerProc.events(proc)]
    assert "worker_stopping" in events and "job_released" in events


def test_second_signal_exits_at_once(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    app.enqueue("long", {"seconds": 30})
    runs = tmp_path / "runs.txt"
    proc = WorkerProc(
        "tests.apps.basic:dq", url, tmp_path / "w.log", ["--grace", "30"], {"RUNS_FILE": str(runs)}
    )
    try:
        # the body has started: a job the database shows running may still wait in the
        # worker's prefetch, and a SIGTERM then gives it back and exits at once, rightly
        wait_for(lambda: runs.exists() and "start" in runs.read_text(), 15, what="the body")
        proc.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert proc.proc.poll() is None  # still in its grace period
        proc.signal(signal.SIGTERM)
        code = proc.wait(3)
    finally:
        proc.stop()
    assert code == 128 + signal.SIGTERM


def test_a_crashed_worker_loop_stops_the_worker_with_a_reason(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    app.enqueue("long", {"seconds": 30})
    proc = WorkerProc(
        "tests.apps.basic:dq",
        url,
        tmp_path / "w.log",
        ["--lease", "0.3"],
        env={"DURQ_FAILPOINTS": "heartbeat=raise"},
    )
    try:
        code = proc.wait(15)
    finally:
        proc.stop()
    assert code == 1
    crashed = [e for e in proc.events() if e["event"] == "worker_crashed"]
    assert crashed and crashed[0]["service"] == "heartbeat"
    assert "failpoint heartbeat fired" in str(crashed[0]["error"])
