"""Batches with real worker processes: two workers drain a batch of 200 and the callback
runs exactly once, after every member, with the right counts (both backends)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import durq
from tests.support.procs import WorkerProc, wait_for, workers

APP = "tests.apps.batches:dq"
ARGS = ["--concurrency", "8", "--lease", "5", "--heartbeat", "0.5"]


def runs(path: Path) -> tuple[list[int], list[dict[str, Any]]]:
    members: list[int] = []
    calls: list[dict[str, Any]] = []
    if not path.exists():
        return members, calls
    for line in path.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "member":
            members.append(int(rest.split()[0]))
        elif kind == "callback":
            calls.append(json.loads(rest))
    return members, calls


def test_two_workers_drain_a_batch_of_200_and_the_callback_runs_once(
    tmp_path: Path, url: str
) -> None:
    app = durq.Durq(url)  # a producer that names the tasks without importing them
    out = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(out)}
    with workers(
        {"app": APP, "url": url, "log": tmp_path / "w1.log", "args": ARGS, "env": env},
        {"app": APP, "url": url, "log": tmp_path / "w2.log", "args": ARGS, "env": env},
    ) as procs:
        with app.batch(on_complete="on_done", meta={"import": 42}) as batch:
            for i in range(200):
                app.enqueue("member", {"n": i, "ms": 2, "fail": i in (13, 77)})
        wait_for(lambda: app.batch_status(batch.id).state == "done", 60, 0.1, "the batch")
        callback = app.get(app.batch_status(batch.id).callback_job_id or 0)
        wait_for(lambda: callback.refresh().state == "succeeded", 30, 0.1, "the callback")
        members, calls = runs(out)
        assert all(p.proc.poll() is None for p in procs), "a worker died"
    assert set(members) >= {j.id for j in app.jobs(task="member", limit=1000)}
    assert calls == [
        {
            "batch_id": batch.id,
            "outcome": "partial",
            "counts": {"failed": 2, "succeeded": 198},
            "meta": {"import": 42},
        }
    ]
    status = app.batch_status(batch.id)
    assert (status.fired, status.size, status.counts) == (1, 200, {"failed": 2, "succeeded": 198})
    # every member and the callback were run by one of the two workers (one outcome event
    # per attempt at the default level: job_succeeded, job_retry_scheduled, job_failed)
    outcomes = {"job_succeeded", "job_retry_scheduled", "job_failed"}
    started = [sum(1 for e in p.events() if e.get("event") in outcomes) for p in procs]
    assert sum(started) >= 201


def test_retrying_failed_members_fires_again_with_completed(tmp_path: Path, url: str) -> None:
    """The podcast import (seed 001): the cut-over runs only on 'completed'; a partial import
    fires 'partial', the user fixes and retries the failed item, and it fires 'completed'."""
    app = durq.Durq(url)
    out = tmp_path / "runs.txt"
    broken = tmp_path / "item-5-broken"
    broken.touch()
    with app.batch(on_complete="on_done") as batch:
        for i in range(20):
            app.enqueue("member", {"n": i, "fail_while": str(broken) if i == 5 else ""})
    proc = WorkerProc(APP, url, tmp_path / "w.log", ARGS, {"RUNS_FILE": str(out)})
    try:
        wait_for(lambda: len(runs(out)[1]) == 1, 60, 0.1, "the first callback")
        (bad,) = app.jobs(task="member", state="failed")
        broken.unlink()  # the item is fixed upstream
        app.retry(bad.id)
        wait_for(lambda: len(runs(out)[1]) == 2, 60, 0.1, "the second callback")
    finally:
        proc.stop()
    first, second = runs(out)[1]
    assert (first["outcome"], first["counts"]) == ("partial", {"failed": 1, "succeeded": 19})
    assert (second["outcome"], second["counts"]) == ("completed", {"succeeded": 20})
    assert app.batch_status(batch.id).fired == 2


def test_cli_batches_show(tmp_path: Path, url: str) -> None:
    from tests.integration.test_cli import run

    app = durq.Durq(url)
    with app.batch(on_complete="on_done", meta={"podcast": "p1"}) as batch:
        app.enqueue("member", {"n": 1})
    shown = run("batches", "show", str(batch.id), "--db", url, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert (data["id"], data["state"], data["counts"], data["meta"], data["fired"]) == (
        batch.id,
        "open",
        {"queued": 1},
        {"podcast": "p1"},
        0,
    )
    text = run("batches", "show", str(batch.id), "--db", url)
    assert text.returncode == 0 and f"batch {batch.id}" in text.stdout
    assert "queued 1" in text.stdout
    missing = run("batches", "show", "999", "--db", url)
    assert missing.returncode == 1 and "no batch with id 999" in missing.stderr
