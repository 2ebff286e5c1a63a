"""The crash matrix: a real worker is crashed (``os._exit``, like SIGKILL) at every named
failpoint, on both backends; after a restart every job ends succeeded, none is lost, and
every extra run began in the crashed process and was one of the jobs it held.

docs/guarantees.md has the table this test proves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import durq
from durq.worker.prefetch import default_depth
from tests.support.procs import ROOT, WorkerProc, wait_for

pytestmark = pytest.mark.slow

APP = "tests.apps.basic:dq"
CONCURRENCY = 4
WORKER_ARGS = [
    "--concurrency",
    str(CONCURRENCY),
    "--lease",
    "1",
    "--heartbeat",
    "0.2",
    "--grace",
    "1",
]

# Where the crash happens, and on which hit of that point (so that some work is done first).
POINTS = {
    "after_claim": 3,  # the claim committed; no task ran yet
    "after_task": 5,  # a task body returned; its outcome is not written
    "before_finish": 3,  # outcomes are about to be written
    "finish_tx": 3,  # inside the transaction that writes outcomes (and claims)
    # inside that transaction, right after a retry was written: the first such transaction
    # (with prefetch on, the eight retries may all be written in one batch on PostgreSQL)
    "retry_tx": 1,
    "heartbeat": 2,  # in the heartbeat loop, before extending leases
    "heartbeat_tx": 2,  # inside the lease-extension transaction
}


def starts(runs: Path) -> dict[int, list[int]]:
    found: dict[int, list[int]] = defaultdict(list)
    for line in runs.read_text().splitlines():
        kind, job_id, _attempt, pid = line.split()
        if kind == "start":
            found[int(job_id)].append(int(pid))
    return found


@pytest.mark.parametrize("point", sorted(POINTS))
def test_crash_at_every_failpoint_loses_nothing(tmp_path: Path, url: str, point: str) -> None:
    app = durq.Durq(url)
    jobs = [app.enqueue("sleepy", {"ms": 20}, max_attempts=10) for _ in range(24)]
    jobs += [app.enqueue("fail_once", {}) for _ in range(8)]  # one retry each
    jobs += [app.enqueue("long", {"seconds": 0.8}) for _ in range(4)]  # long enough to heartbeat
    runs = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs)}
    crashing = WorkerProc(
        APP, url, tmp_path / "crash.log", WORKER_ARGS,
        {**env, "DURQ_FAILPOINTS": f"{point}=exit@{POINTS[point]}"},
    )  # fmt: skip
    try:
        assert crashing.wait(30) == 137, f"the {point} failpoint did not fire"
    finally:
        crashing.stop()
    restarted = WorkerProc(APP, url, tmp_path / "after.log", WORKER_ARGS, env)
    try:
        wait_for(
            lambda: all(app.get(j.id).state == "succeeded" for j in jobs),
            60,
            0.1,
            "every job to succeed",
        )
    finally:
        restarted.stop()
    assert len(app.jobs(limit=1000)) == len(jobs)
    if runs.exists():
        extra = {job: pids for job, pids in starts(runs).items() if len(pids) > 1}
        for job_id, pids in extra.items():
            others = [p for p in pids if p != crashing.pid]
            fail_once = app.get(job_id).task == "fail_once"
            # a fail_once job runs twice by design; beyond that, only the crashed process's runs repeat
            assert len(others) <= (2 if fail_once else 1), (point, job_id, pids)
        repeated = [
            j
            for j, pids in extra.items()
            if crashing.pid in pids and app.get(j).task != "fail_once"
        ]
        # the crashed worker held at most its slots plus its prefetch (running, awaiting their
        # outcome's commit, or claimed ahead): only those can repeat
        assert len(repeated) <= CONCURRENCY + default_depth(CONCURRENCY), (point, repeated)


def test_a_crash_inside_a_migration_leaves_no_partial_schema(url: str) -> None:
    env = {**os.environ, "DURQ_FAILPOINTS": "migration=exit@1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "durq", "migrate", "--db", url], env=env, cwd=ROOT, timeout=60
    )
    assert out.returncode == 137
    with pytest.raises(durq.StoreError, match="durq migrate"):
        durq.Durq(url, migrate=False).store  # noqa: B018  # nothing half-made is left behind
    app = durq.Durq(url)
    assert app.enqueue("echo", {"value": 1}).id == 1
