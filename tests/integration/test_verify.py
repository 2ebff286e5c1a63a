"""``durq verify`` as a user runs it: a real subprocess that starts and kills real workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durq
from durq.proving.verify import Kill, Run, analyse
from tests.support.procs import ROOT, wait_for


def verify(url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``durq verify`` small and fast (300 jobs, 3 kills) with its temp files in ``tmp``."""
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "durq", "verify", "--db", url, "--jobs", "300", "--kills", "3",
         "--seed", "11", "--timeout", "60", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp)},
        timeout=120,
    )  # fmt: skip


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (Linux /proc; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def assert_passed(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, (out.stdout, out.stderr)
    report: dict[str, Any] = json.loads(out.stdout)
    assert report["passed"] and report["summary"].startswith("PASS: lost 0,"), report
    assert (report["jobs"], report["run"], report["succeeded"], report["lost"]) == (
        300,
        300,
        300,
        0,
    )
    assert len(report["kills"]) == 3 and report["reasons"] == []
    # every duplicate's superseded run was in a process that was SIGKILLed
    assert report["contract_violations"] == []
    assert report["duplicated"] == report["duplicated_from_killed"]
    assert report["worst_recovery"] is not None
    assert sum(k["in_flight"] for k in report["kills"]) >= 1  # the kills hit running work
    return report


@pytest.mark.slow
def test_sqlite_passes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = durq.Durq(url)
    other = app.enqueue("unrelated", {"n": 1}, queue="mine")  # another queue is no obstacle
    app.close()
    out = verify(url, tmp_path / "tmp", "--json")
    report = assert_passed(out)
    assert report["queue"] == "durq-verify" and report["seed"] == 11
    app = durq.Durq(url)
    try:
        assert app.jobs(queue="durq-verify", limit=10) == []
        assert [j.id for j in app.jobs(limit=10)] == [other.id]  # the user's job is untouched
        assert app.status()["workers"] == []  # killed workers' registrations removed too
    finally:
        app.close()
    assert list((tmp_path / "tmp").iterdir()) == []  # its temp dir is gone
    assert processes_mentioning(str(tmp_path)) == []


def test_refuses_a_queue_that_has_a_job(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = durq.Durq(url)
    done = app.enqueue("anything", {}, queue="busy")
    app.cancel(done.id)  # any state counts, not only pending ones
    app.close()
    out = verify(url, tmp_path / "tmp", "--queue", "busy")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "queue 'busy'" in out.stderr and "already has jobs" in out.stderr
    app = durq.Durq(url)
    try:
        assert [(j.id, j.state) for j in app.jobs(limit=10)] == [(done.id, "cancelled")]
    finally:
        app.close()


@pytest.mark.slow
def test_ctrl_c_stops_workers_and_removes_its_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    setup = durq.Durq(url)
    setup.store.migrate()
    setup.close()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "durq", "verify", "--db", url, "--jobs", "3000", "--json"],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    app = durq.Durq(url)
    try:
        wait_for(
            lambda: app.jobs(queue="durq-verify", state="succeeded", limit=1) != [],
            30,
            what="verify's workers to run a job",
        )
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted" in err
        assert app.jobs(queue="durq-verify", limit=10) == []
        assert app.status()["workers"] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        app.close()
    assert list(tmp.iterdir()) == []
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.slow
def test_postgres_passes_and_leaves_no_job_behind(pg_url: str, tmp_path: Path) -> None:
    out = verify(pg_url, tmp_path / "tmp", "--json")
    assert_passed(out)
    app = durq.Durq(pg_url)
    try:
        assert app.jobs(queue="durq-verify", limit=10) == []
        assert app.status()["workers"] == []
    finally:
        app.close()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_postgres_refuses_a_queue_that_has_a_job(pg_url: str, tmp_path: Path) -> None:
    app = durq.Durq(pg_url)
    job = app.enqueue("anything", {}, queue="durq-verify")
    app.close()
    out = verify(pg_url, tmp_path / "tmp")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "already has jobs" in out.stderr and "postgresql://" in out.stderr
    app = durq.Durq(pg_url)
    try:
        assert [j.id for j in app.jobs(limit=10)] == [job.id]
    finally:
        app.close()


# -- the analysis, on made-up runs ---------------------------------------------------------


def test_analysis_tells_killed_duplicates_from_lost_leases_and_violations() -> None:
    runs = [
        Run("start", 1, 1, 100, 10.0),  # killed in 100 mid-run, re-run in 200
        Run("start", 1, 2, 200, 13.0),
        Run("end", 1, 2, 200, 13.1),
        Run("start", 2, 1, 100, 10.5),  # finished in 100 but killed before the commit
        Run("end", 2, 1, 100, 10.6),
        Run("start", 2, 2, 200, 12.0),
        Run("end", 2, 2, 200, 12.1),
        Run("start", 3, 1, 200, 11.0),  # ran twice in live 200: its lease was lost
        Run("end", 3, 1, 200, 20.0),
        Run("start", 3, 2, 300, 15.0),
        Run("end", 3, 2, 300, 15.1),
        Run("start", 4, 1, 200, 11.0),  # ran twice in live processes, no lost lease: a bug
        Run("end", 4, 1, 200, 11.1),
        Run("start", 4, 2, 300, 11.5),
        Run("end", 4, 2, 300, 11.6),
        Run("start", 5, 1, 300, 1.0),
        Run("end", 5, 1, 300, 1.1),
    ]
    result = analyse(runs, [Kill(100, 11.0)], {1: {1}, 2: set(), 3: {1}, 4: set()}, 0.0)
    assert (result.run, result.duplicated) == (5, 4)
    assert (result.from_killed, result.lease_expired, result.violations) == (2, 1, [4])
    (kill,) = result.kills
    assert (kill.pid, kill.at, kill.in_flight) == (100, 11.0, 1)
    # job 2 had finished in 100 but its outcome was not committed: a duplicate that the
    # in-flight count does not include, so the report shows it beside it (issue 16 §7)
    assert kill.uncommitted == 1
    assert kill.recovery == pytest.approx(2.0) and result.worst_recovery == pytest.approx(2.0)


def test_analysis_reports_a_job_never_started_again() -> None:
    runs = [Run("start", 1, 1, 100, 1.0)]
    result = analyse(runs, [Kill(100, 2.0), Kill(999, 3.0)], {}, 0.0)
    assert [(k.in_flight, k.recovery) for k in result.kills] == [(1, None), (0, 0.0)]
    assert result.worst_recovery is None and result.run == 0


def test_the_table_says_what_a_duplicate_is_and_shows_both_numbers() -> None:
    """Issue 16 §7: "duplicated 8" next to "jobs in flight at kills 4" needed a reading."""
    from rich.console import Console

    from durq.proving.verify_report import Analysis, KillReport, VerifyReport, report_table

    analysis = Analysis(10, 8, 8, 0, [], [KillReport(1, 1.0, 4, 0.5, 4)])
    report = VerifyReport(
        "sqlite:///x.db", "verify", 10, 1, 2, 4, 2.0, 1, {"succeeded": 10}, analysis, 3.0, False
    )
    console = Console(width=120, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "duplicated (jobs started more than once)" in text
    assert "jobs in flight at kills (still running)" in text
    assert "+ finished, outcome not yet committed" in text
    assert report.to_dict()["kills"][0]["uncommitted"] == 4
