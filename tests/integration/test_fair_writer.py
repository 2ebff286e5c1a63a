"""The fair SQLite writer (issue 14 item 4): a producer that writes without pause, from
another process and from the worker's own, cannot keep a heartbeat from its lease, so a
job with a short lease runs once.

Before the write gate (durq/store/sqlite/gate.py) this was a known limit in
docs/guarantees.md: the heartbeat's ``BEGIN IMMEDIATE`` lost every race against the
producer's back-to-back transactions, the lease lapsed, the reaper gave the job to the
queue again and it ran twice.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import durq
from durq.model import NewJob
from tests.support.procs import ROOT, WorkerProc, wait_for

pytestmark = pytest.mark.slow

# Back-to-back write transactions with next to no pause between them: the rows are built
# once, and each loop is one store transaction of 500 inserts.
FLOOD = """
import sys, time
import durq
from durq.model import NewJob
dq = durq.Durq(sys.argv[1])
rows = [NewJob("flood", "flood", "{}", 0, None, 3, None, None, 0.0, None)] * 500
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    dq.store.enqueue(rows)
"""


def test_a_flooding_producer_cannot_make_a_short_lease_job_run_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = durq.Durq(url)
    jobs = [app.enqueue("long", {"seconds": 4}) for _ in range(2)]
    runs = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs)}
    args = ["--concurrency", "2", "--lease", "1"]  # heartbeat every 1/3 s
    worker = WorkerProc("tests.apps.basic:dq", url, tmp_path / "w.log", args, env)
    other = WorkerProc("tests.apps.basic:dq", url, tmp_path / "o.log", args, env)  # reaps too
    floods: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    local: threading.Thread | None = None
    try:
        wait_for(lambda: runs.exists() and len(runs.read_text().split("\n")) > 2, 20, 0.02, "both")
        for _ in range(2):  # two processes writing without pause
            floods.append(subprocess.Popen([sys.executable, "-c", FLOOD, url, "5"], cwd=ROOT))
        # and a third producer thread inside a process that also heartbeats (this one)
        local = threading.Thread(target=flood_here, args=(app, stop), daemon=True)
        local.start()
        wait_for(lambda: all(app.get(j.id).state == "succeeded" for j in jobs), 40, 0.1, "done")
    finally:
        stop.set()
        if local is not None:  # its last enqueue ends before the test does (and its store)
            local.join(30)
        for proc in floods:
            proc.kill()
            proc.wait(10)
        worker.stop()
        other.stop()
    starts = [line for line in runs.read_text().splitlines() if line.startswith("start")]
    assert len(starts) == 2, starts  # each job ran once
    for job in jobs:
        record = app.get(job.id)
        assert record.attempts == 1 and record.errors == [], record.errors
    assert app.jobs(queue="flood", limit=1)  # the producers did write meanwhile


def flood_here(app: durq.Durq, stop: threading.Event) -> None:
    rows = [NewJob("flood", "flood", "{}", 0, None, 3, None, None, 0.0, None)] * 500
    end = time.monotonic() + 5
    while not stop.is_set() and time.monotonic() < end:
        app.store.enqueue(rows)
