"""``durq soak`` as ``make soak`` runs it, but short: a real subprocess that starts, kills
(SIGKILL and SIGTERM) and restarts real workers while a producer enqueues mixed jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import durq
from durq.proving.soak import WorkerSeries, size_bounded
from tests.support.procs import ROOT


def test_a_short_soak_on_sqlite_passes_and_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'soak.db'}"
    out = subprocess.run(
        [sys.executable, "-m", "durq", "soak", "--db", url, "--seconds", "12", "--rate", "25",
         "--kill-min", "2", "--kill-max", "4", "--report-every", "4", "--drain", "60",
         "--seed", "7", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=150,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    report = json.loads(out.stdout)
    assert report["passed"] and report["summary"].startswith("PASS:"), report["reasons"]
    assert report["lost"] == 0 and report["stuck"] == 0 and report["wrong"] == []
    assert report["contract_violations"] == []
    assert report["enqueued"] == report["finished"] > 150
    assert report["sigkills"] + report["sigterms"] >= 3
    # every kind of job was produced and every one ended as planned
    for kind, figures in report["by_kind"].items():
        assert figures["enqueued"] > 0, kind
        assert figures["ok"] == figures["enqueued"], (kind, figures)
    assert report["by_kind"]["expire"]["runs"] == 0  # expired before they could run
    canary = report["worker_rss"][0]
    assert report["intervals"] and canary["canary"] and canary["end"] == "running"
    assert canary["last"] > canary["first"] > 0  # RSS sampled from /proc over its life
    # it cleaned up: no job of its queue left, no worker registered
    app = durq.Durq(url, migrate=False)
    try:
        assert app.store.list_jobs(state=None, queue="durq-soak", task=None, limit=1) == []
        assert app.store.status_data().workers == []
    finally:
        app.close()


def test_a_soak_that_kills_producer_processes_loses_no_acknowledged_job(tmp_path: Path) -> None:
    """``--producers 2``: producers are processes with a ledger file, killed like workers
    (issue 13); a job whose enqueue never returned to its killed producer is counted as
    unacknowledged and not judged; every acknowledged one must end as planned."""
    url = f"sqlite:///{tmp_path / 'soak.db'}"
    out = subprocess.run(
        [sys.executable, "-m", "durq", "soak", "--db", url, "--seconds", "12", "--rate", "25",
         "--kill-min", "0.3", "--kill-max", "0.8", "--producers", "2", "--report-every", "4",
         "--drain", "60", "--seed", "11", "--json"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=150,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    report = json.loads(out.stdout)
    assert report["passed"], report["reasons"]
    assert report["lost"] == 0 and report["stuck"] == 0 and report["contract_violations"] == []
    assert report["producer_kills"] >= 1
    assert report["sigkills"] + report["sigterms"] >= 10
    assert report["enqueued"] == report["finished"] > 50
    assert report["worst_recovery"] > 0


def test_growth_judgements() -> None:
    # the database: bounded when the second half after warm-up stays near the first
    flat = [(float(t), 10_000_000 + (t % 3) * 1000) for t in range(0, 100, 5)]
    assert size_bounded(flat, warmup=20)[0] is True
    growing = [(float(t), 1_000_000 * t) for t in range(0, 100, 5)]
    assert size_bounded(growing, warmup=20)[0] is False
    assert size_bounded(growing[:3], warmup=0)[0] is None  # too few samples to judge
    # a worker's RSS: judged from its first sample after warm-up
    w = WorkerSeries("w", 1, started=0.0, canary=True)
    w.rss = [(0.0, 10), (30.0, 100), (60.0, 120), (90.0, 130)]
    assert w.growth(warmup=30) == 0.3
    w.rss.append((120.0, 200))
    assert w.growth(warmup=30) == 1.0
    assert WorkerSeries("x", 2, 0.0, False).growth(30) is None
