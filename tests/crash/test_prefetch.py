"""A worker killed with prefetch on (issue 14 item 1): a crash repeats at most the jobs in
hand and prefetched, never a job whose outcome had committed, on both backends."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

import durq
from tests.support.procs import WorkerProc, wait_for

pytestmark = pytest.mark.slow

CONCURRENCY = 2
PREFETCH = 6
ARGS = ["--concurrency", str(CONCURRENCY), "--prefetch", str(PREFETCH), "--lease", "1"]


def test_a_sigkill_with_prefetch_repeats_only_the_jobs_it_held(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    jobs = [app.enqueue("sleepy", {"ms": 30}, max_attempts=10) for _ in range(60)]
    runs = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs)}
    victim = WorkerProc("tests.apps.basic:dq", url, tmp_path / "victim.log", ARGS, env)
    try:
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=100)) >= 10, 30, 0.01, "10 successes"
        )
        victim.kill()
    finally:
        victim.stop()
    # nothing moves until a lease lapses and someone reaps: this is what the dead worker held
    held = {j.id for j in app.jobs(state="running", limit=100)}
    committed = {j.id for j in app.jobs(state="succeeded", limit=100)}
    assert 0 < len(held) <= CONCURRENCY + PREFETCH, held
    time.sleep(1.2)  # past the lease
    rescuer = WorkerProc("tests.apps.basic:dq", url, tmp_path / "rescuer.log", ARGS, env)
    try:
        wait_for(
            lambda: all(app.get(j.id).state == "succeeded" for j in jobs), 60, 0.1, "all to succeed"
        )
    finally:
        rescuer.stop()
    starts: dict[int, list[int]] = defaultdict(list)
    for line in runs.read_text().splitlines():
        kind, job_id, _attempt, pid = line.split()
        if kind == "start":
            starts[int(job_id)].append(int(pid))
    assert set(starts) == {j.id for j in jobs}  # nothing lost
    repeated = {job_id for job_id, pids in starts.items() if len(pids) > 1}
    assert repeated <= held, repeated - held  # only what the dead worker held runs again
    for job_id in committed:
        assert starts[job_id] == [victim.pid]  # a committed outcome is never undone
    for job_id in held:
        # claimed ahead and never started there: run once, by the rescuer
        if victim.pid not in starts[job_id]:
            assert len(starts[job_id]) == 1
        record = app.get(job_id)
        # charged, as documented; or (PostgreSQL) the outcome statement the worker had sent
        # just before the kill committed after the snapshot above: then no error at all
        assert [e.kind for e in record.errors] in ([], ["lease_lost"]), record.errors
