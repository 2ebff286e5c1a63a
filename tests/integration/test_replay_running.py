"""A job cancelled while its body runs and replayed at once, on both backends, with a real
in-process worker and its real threads: the new attempt never runs beside the old body.

The body sleeps 2 s in one ``time.sleep`` call, a blocking C call the cancel cannot cut
short (docs/features/timeouts.md), so the old body is still in it when the replay is
claimed by the same worker (4 slots: one is free for it). Each run records (job id,
attempt, start, end) in a file. The new attempt must start only once the old body has
returned (docs/features/replay.md, "A replay of a job whose body still runs"). Before
this, the worker keyed its attempts by job id, and the new attempt started at once beside
the old body (its entry overwrote the old one's).

With ``concurrency=1`` on the task the store alone already kept them apart (the cancel
turns the old body's slot into a limit hold, so the replay is not claimed before the body
has returned: docs/features/limits.md); that variant guards it. Under ``--pool processes``
the same holds for a body in a child.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import durq
from tests.support.procs import wait_for, workers


def _runs(path: Path) -> list[tuple[int, int, float, float, str]]:
    """(job id, attempt, start, end, why it was stopped or "-") of every body that
    returned, in the order they ended."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        job_id, attempt, start, end, stopped = line.split()
        out.append((int(job_id), int(attempt), float(start), float(end), stopped))
    return out


def _record(runs: Path, start: float) -> None:
    ctx = durq.context()
    with runs.open("a") as out:
        out.write(
            f"{ctx.job_id} {ctx.attempt} {start!r} {time.time()!r} {ctx.interrupted or '-'}\n"
        )


@pytest.mark.parametrize("limited", [False, True], ids=["unlimited", "concurrency_one"])
def test_a_replayed_job_waits_for_its_earlier_body_to_return(
    url: str, tmp_path: Path, limited: bool
) -> None:
    runs = tmp_path / "runs.txt"
    started = tmp_path / "started"
    app = durq.Durq(url)
    limit = {"concurrency": 1, "concurrency_key": "replayed"} if limited else {}

    @app.task(max_attempts=3, **limit)
    def slow() -> None:
        start = time.time()
        try:
            started.write_text(repr(start))
            time.sleep(2.0)  # one blocking call: the cancel lands only once it returns
        finally:
            _record(runs, start)

    @app.task(max_attempts=3)
    def quick(n: int) -> int:
        start = time.time()
        try:
            return n
        finally:
            _record(runs, start)

    job = slow.enqueue()
    before = [quick.enqueue(n=i) for i in range(3)]
    w = app.worker(concurrency=4, lease=5.0)
    thread = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    thread.start()
    other = durq.Durq(url)  # the operator's own handle: another store, as `durq cancel` has
    try:
        wait_for(started.exists, 30, 0.01, "the body to start")
        other.cancel(job.id)
        other.retry(job.id)  # at once: the old body is still in its sleep
        replayed_at = time.time()
        after = [quick.enqueue(n=i) for i in range(3, 6)]
        wait_for(lambda: other.get(job.id).state == "succeeded", 60, 0.05, "the replay")
        wait_for(lambda: other.get(job.id).finished_at is not None, 10, 0.05, "its end")
        for q in before + after:
            wait_for(lambda q=q: other.get(q.id).state == "succeeded", 30, 0.05, "the others")
        time.sleep(0.3)  # a late run, if any, would be recorded by now
        final = other.get(job.id)
    finally:
        w.request_stop()
        thread.join(30)
        other.close()
        app.close()
    assert not thread.is_alive()
    assert w.exit_code == 0
    spans = _runs(runs)
    mine = [r for r in spans if r[0] == job.id]
    assert len(mine) == 2, f"the job ran {len(mine)} times: {spans}"  # once before, once after
    (_, first_attempt, _, first_end, stopped), (_, second_attempt, second_start, _, _) = mine
    assert first_end > replayed_at  # the old body still ran when the job was replayed
    print(
        f"\n{'concurrency=1' if limited else 'unlimited'}: the replay started "
        f"{second_start - first_end:+.3f} s after the old body returned"
    )
    assert second_start >= first_end, f"the replay ran beside its earlier body: {mine}"
    assert (first_attempt, second_attempt) == (1, 1)  # a fresh budget: attempt 1 again
    if not limited:  # the old body was told to stop: by the cancel watch, or at the latest
        # when its replay was claimed (with concurrency=1 the replay is claimed only once
        # the old body's hold is gone; a cancel watch that read after the replay leaves
        # the old body to the heartbeat's lease check)
        assert stopped in ("cancelled", "lease_lost"), mine
    assert mine[1][4] == "-"  # the replay ran to its end
    assert (final.state, final.attempts) == ("succeeded", 1)
    others = sorted(r[0] for r in spans if r[0] != job.id)
    assert others == sorted(q.id for q in before + after)  # each of the others ran once
    kinds = [e.kind.split(":")[0] for e in final.errors]
    assert kinds == ["cancelled", "replayed"], kinds


def test_a_replay_waiting_for_its_earlier_body_is_given_back_at_shutdown(
    url: str, tmp_path: Path
) -> None:
    """The worker stops while the replay waits for the old body: the replay never starts
    here and goes back to the queue without spending an attempt (as a prefetched job)."""
    runs = tmp_path / "runs.txt"
    starts = tmp_path / "starts.txt"
    app = durq.Durq(url)

    @app.task(max_attempts=3)
    def slow() -> None:
        start = time.time()
        with starts.open("a") as out:
            out.write(f"{durq.context().attempt}\n")
        try:
            time.sleep(2.0)
        finally:
            _record(runs, start)

    job = slow.enqueue()
    w = app.worker(concurrency=4, lease=5.0, grace=10.0)
    thread = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    thread.start()
    other = durq.Durq(url)
    try:
        wait_for(starts.exists, 30, 0.01, "the body to start")
        other.cancel(job.id)
        other.retry(job.id)
        # claimed again by this worker (running, a new token), but waiting
        wait_for(lambda: len(w.prefetch) == 1, 10, 0.01, "the new claim to wait")
        assert other.get(job.id).state == "running"
        assert starts.read_text().splitlines() == ["1"]  # no second body started
        w.request_stop()  # while the old body is still in its sleep
        thread.join(30)
        final = other.get(job.id)
    finally:
        w.request_stop()
        thread.join(30)
        other.close()
        app.close()
    assert not thread.is_alive() and w.exit_code == 0
    assert starts.read_text().splitlines() == ["1"]  # the replay never ran here
    assert len(_runs(runs)) == 1  # the old body returned before the worker stopped
    assert (final.state, final.attempts) == ("queued", 0)  # given back, no attempt spent
    assert [e.kind.split(":")[0] for e in final.errors] == ["cancelled", "replayed"]


def pool_spec(url: str, tmp_path: Path) -> dict[str, object]:
    """A worker process of ``tests.apps.interrupts`` with ``--pool processes`` and 2
    children, its marks (start files, ``runs.txt``) in ``tmp_path``."""
    return {"app": "tests.apps.interrupts", "url": url, "log": tmp_path / "w.log",
            "args": ("--concurrency", "2", "--pool", "processes"),
            "env": {"DURQ_MARKS": str(tmp_path)}}  # fmt: skip


def test_a_replayed_job_waits_for_its_earlier_body_in_the_process_pool(
    url: str, tmp_path: Path
) -> None:
    """``--pool processes`` (2 children): the old body's child is stopped (the cancel's
    SIGTERM, or the new claim's), and the replay starts in a child only after it ended."""
    spec = pool_spec(url, tmp_path)
    runs = tmp_path / "runs.txt"
    app = durq.Durq(url)
    try:
        job = app.enqueue("replayed", {"seconds": 2.0}, queue="interrupts", max_attempts=3)
        with workers(spec) as (worker,):
            wait_for((tmp_path / f"started-{job.id}").exists, 60, 0.01, "the body to start")
            app.cancel(job.id)
            app.retry(job.id)
            wait_for(lambda: app.get(job.id).state == "succeeded", 60, 0.05, "the replay")
            wait_for(lambda: len(_runs(runs)) == 2, 10, 0.05, "both runs recorded")
            assert worker.proc.poll() is None  # the worker goes on
        final = app.get(job.id)
    finally:
        app.close()
    (first, second) = _runs(runs)
    print(f"\nprocess pool: the replay started {second[2] - first[3]:+.3f} s after the old body")
    assert second[2] >= first[3], f"the replay ran beside its earlier body: {first}, {second}"
    assert (first[1], second[1]) == (1, 1) and second[4] == "-"
    assert (final.state, final.attempts) == ("succeeded", 1)
