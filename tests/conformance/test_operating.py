"""The operator's reads on every backend: worker reports, keyset pages of jobs, the overview's
series, and "why is this job not running" for each cause (durq.observability.why)."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

import durq
from durq.errors import ConfigError
from durq.model import AttemptError, InHand, JobFilter, Outcome, WorkerInfo, WorkerReport
from durq.observability import views
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq, wid: str = "w1", queues: tuple[str, ...] = ("default",)) -> None:
    now = app.store.now()
    app.store.register_worker(
        WorkerInfo(
            wid, socket.gethostname(), 4242, queues, tuple(sorted(app.tasks)), now, now, LEASE
        )
    )


def tasks(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(concurrency=1, concurrency_key="bank")
    def pay(n: int = 0) -> int:
        return n

    @app.task(rate_limit="2/m")
    def ping(n: int = 0) -> int:
        return n


def why(app: durq.Durq, job_id: int) -> tuple[str, str]:
    record = app.store.get(job_id)
    assert record is not None
    w = views.why(app.store, record)
    return w.cause, w.sentence


def test_worker_report_round_trips_and_ages_out(app: durq.Durq, clock: Clock) -> None:
    tasks(app)
    register(app)
    report = WorkerReport("threads", 8, "9.9", (InHand(7, "work", clock.now - 3),), 5, 2)
    app.store.report_worker("w1", report)
    [row] = views.workers(app.store)
    assert row["id"] == "w1" and row["pid"] == 4242 and row["pool"] == "threads"
    assert row["concurrency"] == 8 and row["version"] == "9.9"
    assert row["done"] == 5 and row["failed"] == 2 and row["state"] == "busy"
    assert row["in_hand"][0]["id"] == 7 and row["in_hand"][0]["task"] == "work"
    assert row["in_hand"][0]["running_for"] == pytest.approx(3, abs=0.5)
    clock.advance(LEASE + 1)  # missed its beats: gone
    assert views.workers(app.store) == []


def test_job_page_filters_and_keyset(app: durq.Durq) -> None:
    tasks(app)
    ids = [app.enqueue("work", {"n": i}, meta={"tag": f"t{i % 3}"}).id for i in range(25)]
    other = app.enqueue("work", {"n": 99}, queue="other", key="k-99").id
    page, cursor = views.job_page(app.store, JobFilter(queue="default", limit=10))
    assert [j.id for j in page] == ids[::-1][:10] and cursor == ids[-10]
    page2, cursor2 = views.job_page(app.store, JobFilter(queue="default", limit=10, before=cursor))
    assert [j.id for j in page2] == ids[::-1][10:20]
    page3, cursor3 = views.job_page(app.store, JobFilter(queue="default", limit=10, before=cursor2))
    assert len(page3) == 5 and cursor3 is None
    assert [j.id for j in views.job_page(app.store, JobFilter(key="k-99"))[0]] == [other]
    tagged = views.job_page(app.store, JobFilter(text='"t1"'))[0]
    assert {j.id for j in tagged} == {ids[i] for i in range(25) if i % 3 == 1}
    assert views.job_page(app.store, JobFilter(state="failed"))[0] == []
    claimed = app.store.claim("default", ["work"], 1, LEASE, "w1")
    err = AttemptError(1, app.store.now(), "ValueError", "bad <b>", "Traceback...", "permanent")
    app.store.finish([Outcome(claimed[0].id, claimed[0].lease_token, "failed", error=err)])
    [failed] = views.job_page(app.store, JobFilter(state="failed", text="bad <b>"))[0]
    assert failed.id == claimed[0].id
    with pytest.raises(ConfigError):
        app.store.job_page(JobFilter(state="nope"))
    with pytest.raises(ConfigError):
        app.store.job_page(JobFilter(limit=0))
    assert app.store.enqueued_total() == 26


def test_series_counts_finished_per_minute(app: durq.Durq, clock: Clock) -> None:
    tasks(app)
    for i in range(3):
        app.enqueue("work", {"n": i})
    claimed = app.store.claim("default", ["work"], 3, LEASE, "w1")
    err = AttemptError(1, clock.now, "E", "m")
    app.store.finish(
        [Outcome(c.id, c.lease_token, "succeeded") for c in claimed[:2]]
        + [Outcome(claimed[2].id, claimed[2].lease_token, "failed", error=err)]
    )
    s = views.series(app.store, ["default"])
    assert sum(s["queues"]["default"]["succeeded"]) == 2
    assert sum(s["queues"]["default"]["failed"]) == 1
    assert s["queues"]["default"]["succeeded"][-1] == 2  # the newest minute is last


def test_finished_timings_give_wait_and_run_and_claims_carry_run_at(
    app: durq.Durq, clock: Clock
) -> None:
    tasks(app)
    job = app.enqueue("work", {"n": 1})
    late = app.enqueue("work", {"n": 2}, delay=5)
    clock.advance(7)  # job waited 7 s, late 2 s (due at +5)
    claimed = app.store.claim("default", ["work"], 2, LEASE, "w1")
    assert {c.id: c.run_at for c in claimed} == {
        job.id: pytest.approx(clock.now - 7, abs=0.01),
        late.id: pytest.approx(clock.now - 2, abs=0.01),
    }
    clock.advance(3)  # both ran 3 s
    err = AttemptError(1, clock.now, "E", "m")
    by_id = {c.id: c for c in claimed}
    app.store.finish(
        [
            Outcome(job.id, by_id[job.id].lease_token, "succeeded"),
            Outcome(late.id, by_id[late.id].lease_token, "failed", error=err),
        ]
    )
    rows = app.store.finished_timings(clock.now - 60, ["default", "other"])
    assert sorted((q, round(w, 2), round(r, 2)) for q, w, r in rows) == [
        ("default", 2.0, 3.0),
        ("default", 7.0, 3.0),
    ]
    clock.advance(10)
    assert app.store.finished_timings(clock.now - 1, ["default"]) == []  # both ended before
    assert (
        len(app.store.finished_timings(clock.now - 60, ["default"], limit=1)) == 2
    )  # a state each


def test_why_for_each_cause(app: durq.Durq, clock: Clock) -> None:
    tasks(app)
    stranded = app.enqueue("work", {"n": 1}).id
    assert why(app, stranded)[0] == "stranded"
    register(app)
    assert why(app, stranded)[0] == "ready"

    scheduled = app.enqueue("work", {"n": 2}, delay=600).id
    cause, sentence = why(app, scheduled)
    assert cause == "scheduled" and "scheduled for" in sentence

    # a retry waiting for its backoff
    app.store.claim("default", ["work"], 10, LEASE, "w1")  # takes `stranded` (the ready one)
    record = app.store.get(stranded)
    assert record is not None and record.lease_token is not None
    err = AttemptError(1, clock.now, "TimeoutError", "upstream slow")
    app.store.finish([Outcome(stranded, record.lease_token, "retry", error=err, delay=120)])
    cause, sentence = why(app, stranded)
    assert cause == "backoff" and "upstream slow" in sentence

    # concurrency limit full: one pay job runs, the next waits, naming the holder
    first = app.enqueue("pay", {"n": 1}).id
    second = app.enqueue("pay", {"n": 2}).id
    [held] = app.store.claim("default", ["pay"], 10, LEASE, "w1")
    assert held.id == first
    cause, sentence = why(app, second)
    assert cause == "concurrency_limit" and "'bank'" in sentence and str(first) in sentence
    assert why(app, first)[0] == "running" and "w1" in why(app, first)[1]

    # rate limit spent
    pings = [app.enqueue("ping", {"n": i}).id for i in range(3)]
    started = app.store.claim("default", ["ping"], 10, LEASE, "w1")
    assert len(started) == 2
    waiting = next(i for i in pings if i not in {c.id for c in started})
    cause, sentence = why(app, waiting)
    assert cause == "rate_limit" and "next slot" in sentence

    # paused queue wins over everything else for a queued job
    app.pause("default", "maintenance <now>")
    cause, sentence = why(app, waiting)
    assert cause == "paused" and "maintenance <now>" in sentence
    app.resume("default")

    # parked, finished, and a lease held by a worker that is gone
    parked = app.enqueue("work", {"n": 3}, park=True).id
    assert why(app, parked)[0] == "parked"
    app.store.unregister_worker("w1")
    cause, sentence = why(app, first)
    assert cause == "lease_orphaned" and "no longer seen" in sentence
    app.cancel(second)
    assert why(app, second)[0] == "finished"

    # a child whose parent has not finished waits for it (its task may be served or not)
    child = app.enqueue("work", {"n": 4}, after=[parked]).id
    cause, sentence = why(app, child)
    assert cause == "waiting" and "parent jobs" in sentence


def test_job_page_and_count_filter_by_tag(app: durq.Durq) -> None:
    """JobFilter.tag: keyset pages and counts of the jobs carrying a tag, with the other
    filters (the dashboard's tag filter and its bulk actions on the failed set)."""
    tasks(app)
    tagged = [app.enqueue("work", {"n": i}, tags=["tenant:a", f"n{i}"]).id for i in range(12)]
    app.enqueue("work", {"n": 99}, tags=["tenant:b"])
    app.enqueue("work", {"n": 98}, queue="other", tags=["tenant:a"])
    f = JobFilter(queue="default", tag="tenant:a", limit=5)
    page, cursor = views.job_page(app.store, f)
    seen = [j.id for j in page]
    while cursor is not None:
        page, cursor = views.job_page(app.store, replace(f, before=cursor))
        seen += [j.id for j in page]
    assert seen == tagged[::-1]
    assert app.store.count_jobs(replace(f, limit=1), 100) == 12
    assert app.store.count_jobs(JobFilter(tag="tenant:a"), 100) == 13
    assert app.store.count_jobs(JobFilter(tag="tenant:a"), 5) == 5  # capped
    assert [j.id for j in views.job_page(app.store, JobFilter(tag="n3"))[0]] == [tagged[3]]
    assert views.job_page(app.store, JobFilter(tag="nobody"))[0] == []
    [c] = app.store.claim("default", ["work"], 1, LEASE, "w1")  # the oldest: tagged[0]
    err = AttemptError(1, app.store.now(), "ValueError", "bad", "", "permanent")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=err)])
    failed = JobFilter(state="failed", tag="tenant:a")
    assert [j.id for j in views.job_page(app.store, failed)[0]] == [tagged[0]]
    assert app.store.count_jobs(failed, 100) == 1
    assert app.store.count_jobs(replace(failed, tag="tenant:b"), 100) == 0


def test_relatives_list_the_first_parents_and_count_the_rest(app: durq.Durq) -> None:
    """views.relatives: a fan-in's callback lists its first parents by id with their task,
    state and on_parent_failure, counts all of them and the rest by state, and names the
    parents it still waits for; views.cancelled_by names the parent that cancelled a job."""
    tasks(app)
    members = [app.enqueue("work", {"n": i}).id for i in range(12)]
    runs = app.enqueue("pay", {}, after=members[:2], on_parent_failure="run").id
    callback = app.enqueue("ping", {}, after=members).id
    claimed = app.store.claim("default", ["work"], 5, LEASE, "w1")  # members[:5]
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1") for c in claimed])
    deps = views.relatives(app.store, callback, shown=4)
    parents = deps["parents"]
    assert [r["id"] for r in parents["rows"]] == members[:4]
    assert parents["rows"][0] == {
        "id": members[0], "task": "work", "state": "succeeded", "on_failure": "cancel",
    }  # fmt: skip
    assert parents["total"] == 12 and parents["counts"] == {"succeeded": 5, "queued": 7}
    assert parents["rest"] == {"succeeded": 1, "queued": 7}
    assert deps["children"]["total"] == 0
    assert [r["id"] for r in deps["waiting_for"]["rows"]] == members[5:9]
    assert deps["waiting_for"]["total"] == 7
    first = views.relatives(app.store, members[0])
    assert [(r["id"], r["task"], r["on_failure"]) for r in first["children"]["rows"]] == [
        (runs, "pay", "run"), (callback, "ping", "cancel"),
    ]  # fmt: skip
    assert first["parents"]["total"] == 0 and first["waiting_for"]["total"] == 0
    assert views.cancelled_by(app.get(callback)) is None
    [c] = app.store.claim("default", ["work"], 1, LEASE, "w1")  # members[5]
    err = AttemptError(1, app.store.now(), "ValueError", "bad", "", "permanent")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=err)])
    assert app.get(callback).state == "cancelled"
    assert views.cancelled_by(app.get(callback)) == {
        "message": f"parent job {members[5]} (work) ended failed; not run "
        "(on_parent_failure='cancel')",
        "parent_id": members[5], "parent_task": "work", "parent_state": "failed",
    }  # fmt: skip
    assert views.cancelled_by(app.get(members[5])) is None  # failed itself, not cancelled


def test_recent_batches_newest_first(app: durq.Durq) -> None:
    tasks(app)
    made = []
    for _ in range(3):
        with app.batch() as b:
            app.enqueue("work", {"n": 1})
        made.append(b.id)
    assert app.store.recent_batches(None, 2) == made[::-1][:2]
    assert app.store.recent_batches(made[1], 10) == [made[0]]


def test_count_jobs_and_delete_failed_across_queues(app: durq.Durq, clock: Clock) -> None:
    tasks(app)
    failed: dict[str, list[int]] = {}
    for queue in ("a", "b"):
        for i in range(3):
            app.enqueue("work", {"n": i}, queue=queue)
        claimed = app.store.claim(queue, ["work"], 3, LEASE, "w1")
        err = AttemptError(1, clock.now, "E", "m")
        app.store.finish([Outcome(c.id, c.lease_token, "failed", error=err) for c in claimed])
        failed[queue] = sorted(c.id for c in claimed)
    kept = app.enqueue("work", {"n": 9}, queue="a").id  # queued: never deleted
    every = JobFilter(state="failed")
    assert app.store.count_jobs(every, 100) == 6
    assert app.store.count_jobs(every, 4) == 4  # counted up to the cap
    assert app.store.count_jobs(JobFilter(state="failed", queue="b"), 100) == 3
    newest = max(failed["b"])
    assert app.store.count_jobs(JobFilter(state="failed", before=newest), 100) == 5
    assert app.store.count_jobs(JobFilter(), 100) == 7
    deleted = app.store.delete_failed([failed["a"][0], failed["b"][0], kept])
    assert deleted == 2 and app.store.get(kept) is not None
    assert app.store.get(failed["a"][0]) is None and app.store.get(failed["b"][0]) is None
    assert app.store.count_jobs(every, 100) == 4
    assert app.store.delete_failed([]) == 0


def test_each_failed_attempt_keeps_its_start_and_worker(app: durq.Durq, clock: Clock) -> None:
    """The statement that records a failed attempt writes the attempt's start and lease
    holder into its entry (retry, fail, and the reaper's lost lease); the attempt that
    succeeds is the row's own start, end and worker (views.attempts lists them all)."""
    tasks(app)
    job = app.enqueue("work", {"n": 1})
    starts: list[float] = []
    for worker, kind in (("w1", "retry"), ("w2", "lost"), ("w3", "succeeded")):
        [c] = app.store.claim("default", ["work"], 1, LEASE, worker)
        starts.append(clock.now)
        clock.advance(2)
        if kind == "retry":
            err = AttemptError(1, clock.now, "ValueError", "bad", "Traceback: bad\n", "transient")
            app.store.finish([Outcome(c.id, c.lease_token, "retry", error=err, delay=1)])
        elif kind == "lost":
            clock.advance(LEASE)  # w2 stopped heartbeating
            app.store.reap()
        else:
            app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
        clock.advance(5)
    done = app.get(job.id)
    assert done.state == "succeeded"
    rows = views.attempts(done)
    assert [(r["attempt"], r["worker_id"], r["outcome"]) for r in rows] == [
        (1, "w1", "transient"),
        (2, "w2", "lease_lost"),
        (3, "w3", "succeeded"),
    ]
    assert [r["started_at"] for r in rows] == pytest.approx(starts, abs=0.01)
    assert rows[0]["ended_at"] == pytest.approx(starts[0] + 2, abs=0.01)
    assert rows[0]["traceback"] == "Traceback: bad\n" and rows[0]["error"] == "ValueError: bad"
    assert rows[2]["ended_at"] == pytest.approx(starts[2] + 2, abs=0.01)
    failing = app.enqueue("work", {"n": 2}, max_attempts=1)
    [c] = app.store.claim("default", ["work"], 1, LEASE, "w4")
    err = AttemptError(1, clock.now, "KeyError", "k", "", "permanent")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=err)])
    [entry] = app.get(failing.id).errors
    assert entry.worker_id == "w4" and entry.started_at == pytest.approx(clock.now, abs=0.01)
