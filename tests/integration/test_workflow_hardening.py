"""Workflow features together in real processes: two workers killed with SIGKILL at
random while batches of limited jobs (some of which pause their queue) and a per-second
periodic schedule run, a producer enqueueing and an operator resuming the queue.

Invariants checked at the end: no job lost (every member succeeded), every batch fired
exactly once (one callback job per batch; its run is at-least-once, since a kill inside
the callback runs it again), the limit of 2 per host never exceeded among completed runs,
every periodic slot enqueued at most once, and no worker crashed.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import durq
from tests.support.procs import WorkerProc, wait_for

HOSTS = ("a.example", "b.example")
BATCHES = 6
PER_BATCH = 8


def read(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def max_overlap(runs: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def test_kill_9_workers_while_batches_limits_pauses_and_periodic_run(
    url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"RUNS_FILE": str(runs), "MARKS_DIR": str(marks)}
    args = ["--lease", "1.5", "--concurrency", "4", "--grace", "1", "--no-prune"]
    from tests.apps import hardening

    app = durq.Durq(url)
    app.tasks.update(hardening.dq.tasks)  # the producer knows the limits and the callback
    fetch, fetched = hardening.fetch, hardening.fetched
    procs: list[WorkerProc] = []
    stop = threading.Event()
    n = 0

    def start() -> WorkerProc:
        nonlocal n
        n += 1
        log = tmp_path / f"w{n}.log"
        proc = WorkerProc("tests.apps.hardening:dq", url, log, args, env)
        procs.append(proc)
        return proc

    def operator() -> None:  # resumes the queue the jobs keep pausing
        resumer = durq.Durq(url)
        try:
            while not stop.wait(0.3):
                resumer.resume("fetch")
        finally:
            resumer.close()

    resuming = threading.Thread(target=operator, daemon=True)
    batch_ids: list[int] = []
    try:
        live = [start(), start()]
        resuming.start()
        rng = random.Random(7)
        for b in range(BATCHES):
            with app.batch(on_complete=fetched, meta={"b": b}) as batch:
                for i in range(PER_BATCH):
                    payload = {"host": HOSTS[i % 2], "ms": 60, "pause_once": i % 4 == 0}
                    app.enqueue_with(
                        "fetch", payload, fetch.options().opts, task=app.tasks["fetch"]
                    )
            batch_ids.append(batch.id)
            time.sleep(rng.uniform(0.2, 0.6))
            victim = live.pop(rng.randrange(len(live)))
            victim.signal(signal.SIGKILL)
            victim.wait(10)
            live.append(start())

        def settled() -> bool:
            ran = {int(r[1]) for r in read(runs) if r[0] == "batch"}
            return ran == set(batch_ids) and all(
                app.batch_status(i).state == "done" for i in batch_ids
            )

        wait_for(settled, 180, 0.2, "every batch done and its callback run")
    finally:
        stop.set()
        resuming.join(5)
        for proc in procs:
            proc.stop()
    try:
        # no job lost: every member succeeded; each batch fired once, completed
        for batch_id in batch_ids:
            status = app.batch_status(batch_id)
            assert (status.fired, status.outcome, status.counts) == (
                1,
                "completed",
                {"succeeded": PER_BATCH},
            ), status
        callbacks = app.jobs(task="fetched", limit=1000)
        assert Counter(j.payload["batch_id"] for j in callbacks) == Counter(batch_ids)
        # never more than 2 fetches per host at once (completed runs)
        rows = [r for r in read(runs) if r[0] == "fetch"]
        for host in HOSTS:
            spans = [(float(r[2]), float(r[3])) for r in rows if r[5] == host]
            assert max_overlap(spans) <= 2, host
        # every job asked to pause the queue did so once (then ran after a resume)
        assert len(list(marks.iterdir())) == BATCHES * PER_BATCH // 4
        # no worker crashed (a kill -9 is not a crash: its log just ends)
        for proc in procs:
            assert not [e for e in proc.events() if e.get("event") == "worker_crashed"]
        # periodic: each slot at most one job, keys unique
        slots = [j.payload["slot"] for j in app.jobs(task="tick", limit=10_000)]
        assert slots and len(slots) == len(set(slots))
    finally:
        app.close()
