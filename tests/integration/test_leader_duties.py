"""Leader duties in real worker processes (issue 13, defects 1 and 2), on both backends.

1. A rolling deploy: an older worker leads; a newer one brings a schedule only it knows.
   Before the fix the new schedule fired 0 times in 12 s on PostgreSQL, and
   ``durq periodic list`` showed nothing wrong.
2. A worker started with ``--no-prune`` leads; another asks for 1 s retention. Before the
   fix on PostgreSQL 20 of 20 old jobs were kept: the non-pruning leader held the one
   "maintenance" leadership, so nobody pruned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT, WorkerProc, wait_for, workers

pytestmark = pytest.mark.slow

ARGS = ("--lease", "2", "--grace", "2")


def jobs_of(url: str, task: str) -> list[durq.Job]:
    dq = durq.Durq(url, migrate=False)
    try:
        return dq.jobs(task=task, limit=10_000)
    except durq.StoreError:
        return []
    finally:
        dq.close()


def test_an_old_leader_fires_the_schedule_only_new_workers_define(url: str, tmp_path: Path) -> None:
    old_args = {"app": "tests.apps.rolling_old", "url": url, "log": tmp_path / "old.log",
                "args": ARGS, "env": {"DURQ_CODE_VERSION": "v1"}}  # fmt: skip
    with workers(old_args) as (old,):
        wait_for(lambda: len(jobs_of(url, "old_beat")) >= 2, 30, 0.1, "the old leader to fire")
        new = WorkerProc(
            "tests.apps.rolling_new", url, tmp_path / "new.log",
            ("--queues", "reports", *ARGS), {"DURQ_CODE_VERSION": "v2"},
        )  # fmt: skip
        try:
            # the new worker serves only "reports": every new_report job it runs was fired
            # by whichever leads (on PostgreSQL, the old worker)
            wait_for(
                lambda: sum(j.state == "succeeded" for j in jobs_of(url, "new_report")) >= 3,
                30, 0.1, "the new schedule to fire and run",
            )  # fmt: skip
            env = {**os.environ, "PYTHONPATH": str(ROOT), "DURQ_URL": url}
            out = subprocess.run(
                [sys.executable, "-m", "durq", "periodic", "list", "--app",
                 "tests.apps.rolling_old", "--json"],
                capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            rows = {r["name"]: r for r in json.loads(out.stdout)}
            assert rows["new_report"]["standing"] == ["live", "not in this app"]
            assert rows["new_report"]["code_version"] == "v2"
            assert rows["old_beat"]["standing"][0] == "live"
        finally:
            new.stop()
        assert old.proc.poll() is None, old.log.read_text()[-2000:]


def test_a_no_prune_leader_does_not_block_retention(url: str, tmp_path: Path) -> None:
    dq = durq.Durq(url)
    try:

        @dq.task(name="old_beat", queue="rolling")
        def old_beat(slot: int) -> int:
            return slot

        done = [old_beat.enqueue(slot=i) for i in range(20)]
        w = dq.worker(concurrency=2, lease=5, prune_interval=None)
        assert w.run(install_signals=False, stop_when_idle=True) == 0
        assert all(dq.get(j.id).state == "succeeded" for j in done)
    finally:
        dq.close()
    lazy = {"app": "tests.apps.rolling_old", "url": url, "log": tmp_path / "lazy.log",
            "args": (*ARGS, "--no-prune")}  # fmt: skip
    pruning = {"app": "tests.apps.rolling_old", "url": url, "log": tmp_path / "pruner.log",
               "args": (*ARGS, "--retain", "succeeded=1", "--prune-interval", "0.5")}  # fmt: skip
    with workers(lazy) as _:
        wait_for(lambda: (tmp_path / "lazy.log").read_text().count("worker_started") > 0, 30)
        with workers(pruning) as _:
            ids = {j.id for j in done}
            wait_for(
                lambda: not ids & {j.id for j in jobs_of(url, "old_beat")},
                30, 0.2, "the 20 old jobs to be pruned",
            )  # fmt: skip
