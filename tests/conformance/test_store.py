"""Store transitions (DESIGN §2, §3), run against every backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import durq
from durq.model import AttemptError, InsertedRows, NewJob, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(max_attempts=3)
    def other(n: int = 0) -> int:
        return n


def claim(
    app: durq.Durq,
    limit: int = 10,
    tasks: tuple[str, ...] = ("work", "other"),
    queue: str = "default",
):
    return app.store.claim(queue, list(tasks), limit, LEASE, "w1")


def err(attempt: int, kind: str = "transient") -> AttemptError:
    return AttemptError(attempt, 0.0, "ValueError", "boom", "", kind)


def test_enqueue_claim_finish_records_result(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=7)
    assert job.state == "queued" and job.attempts == 0
    (c,) = claim(app)
    assert (c.id, c.attempt, c.max_attempts) == (job.id, 1, 3)
    assert app.get(job.id).state == "running"
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="7")]) == [True]
    done = app.get(job.id)
    assert (done.state, done.result, done.attempts) == ("succeeded", 7, 1)
    assert claim(app) == []


def test_claim_order_is_priority_then_run_at_then_fifo(app: durq.Durq, clock: Clock) -> None:
    register(app)
    w = app.tasks["work"]
    a = w.enqueue(n=1)
    b = w.options(priority=-5).enqueue(n=2)
    c = w.enqueue(n=3)
    later = w.options(delay=10).enqueue(n=4)
    assert later.state == "scheduled"
    got = [x.id for x in claim(app, limit=10)]
    assert got == [b.id, a.id, c.id]
    clock.advance(11)
    assert [x.id for x in claim(app)] == [later.id]


def test_claim_takes_at_most_limit_and_only_named_tasks(app: durq.Durq) -> None:
    register(app)
    for i in range(5):
        app.tasks["work"].enqueue(n=i)
    stranger = app.enqueue("unknown_task", {"x": 1})
    got = claim(app, limit=3, tasks=("work",))
    assert len(got) == 3
    assert len(claim(app, limit=10, tasks=("work",))) == 2
    assert claim(app, limit=10, tasks=("work",)) == []
    assert app.get(stranger.id).state == "queued"


def test_every_claim_gets_a_fresh_token(app: durq.Durq, clock: Clock) -> None:
    register(app)
    jobs = [app.tasks["work"].enqueue(n=i) for i in range(20)]
    first = claim(app, limit=20)
    tokens = {c.lease_token for c in first}
    assert len(tokens) == 20
    clock.advance(LEASE + 1)
    assert app.store.reap().recovered == 20
    second = claim(app, limit=20)
    assert {c.id for c in second} == {j.id for j in jobs}
    assert not tokens & {c.lease_token for c in second}


def test_stale_token_cannot_finish_retry_heartbeat_progress_or_release(
    app: durq.Durq, clock: Clock
) -> None:
    """A worker whose lease was taken over cannot write anything for the job (fencing)."""
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    (old,) = claim(app)
    clock.advance(LEASE + 1)
    assert app.store.reap().recovered == 1
    (new,) = claim(app)
    assert new.id == job.id and new.attempt == 2
    s = app.store
    assert s.finish([Outcome(old.id, old.lease_token, "succeeded", result='"A"')]) == [False]
    assert s.finish([Outcome(old.id, old.lease_token, "retry", error=err(1), delay=0)]) == [False]
    assert s.finish([Outcome(old.id, old.lease_token, "failed", error=err(1))]) == [False]
    assert s.extend_leases([(old.id, old.lease_token)], LEASE) == [(old.id, old.lease_token)]
    assert s.set_progress(old.id, old.lease_token, '{"fraction": 1}') is False
    assert s.release(old.id, old.lease_token, 2, "{}") is None
    row = app.get(job.id)
    assert (row.state, row.attempts, row.result, row.progress) == ("running", 2, None, None)
    assert s.extend_leases([(new.id, new.lease_token)], LEASE) == []
    assert s.finish([Outcome(new.id, new.lease_token, "succeeded", result='"B"')]) == [True]
    assert app.get(job.id).result == "B"


def test_extend_leases_answers_per_id_and_token(app: durq.Durq, clock: Clock) -> None:
    """One heartbeat holding a job under its current token and a stale one (a replay
    claimed while the old body still runs in the same worker): the current lease is
    extended, the stale one alone is reported lost, whatever their order."""
    register(app)
    job = app.tasks["work"].enqueue()
    (first,) = claim(app)
    app.cancel(job.id)
    app.retry(job.id)
    (second,) = claim(app)
    assert (first.id, second.id) == (job.id, job.id)
    assert first.lease_token != second.lease_token
    stale, current = (job.id, first.lease_token), (job.id, second.lease_token)
    for leases in ([current, stale], [stale, current]):
        before = app.store.get(job.id)
        assert before is not None and before.lease_expires_at is not None
        clock.advance(1)
        assert app.store.extend_leases(leases, LEASE) == [stale]
        after = app.store.get(job.id)
        assert after is not None and after.lease_expires_at is not None
        assert after.lease_expires_at > before.lease_expires_at  # the current one extended
    assert app.store.extend_leases([current, current], LEASE) == []
    assert app.store.extend_leases([], LEASE) == []


def test_grouped_finish_applies_each_row_on_its_own_token(app: durq.Durq) -> None:
    register(app)
    for i in range(3):
        app.tasks["work"].enqueue(n=i)
    a, b, c = claim(app)
    outcomes = [
        Outcome(a.id, a.lease_token, "succeeded", result="1"),
        Outcome(b.id, b.lease_token + 1, "succeeded", result="2"),  # wrong token
        Outcome(c.id, c.lease_token, "retry", error=err(1), delay=60),
    ]
    assert app.store.finish(outcomes) == [True, False, True]
    assert app.get(a.id).state == "succeeded"
    assert app.get(b.id).state == "running"
    scheduled = app.get(c.id)
    assert scheduled.state == "scheduled" and scheduled.attempts == 1
    assert [e.message for e in scheduled.errors] == ["boom"]


def test_reaper_requeues_then_fails_when_attempts_run_out(app: durq.Durq, clock: Clock) -> None:
    """Lost leases count as attempts: a job whose worker keeps dying ends failed, with history."""
    register(app)
    job = app.tasks["work"].options(max_attempts=2).enqueue()
    claim(app)
    clock.advance(LEASE + 1)
    first = app.store.reap()
    assert (first.recovered, first.failed, first.job_ids) == (1, 0, (job.id,))
    assert app.get(job.id).state == "queued"
    app.tasks["work"].enqueue()  # a newer job: the recovered one keeps its place ahead of it
    assert [c.id for c in claim(app, limit=1)] == [job.id]
    clock.advance(LEASE + 1)
    assert app.store.reap().failed == 1
    dead = app.get(job.id)
    assert dead.state == "failed" and dead.attempts == 2
    assert [e.kind for e in dead.errors] == ["lease_lost", "lease_lost"]
    assert app.status()["last_reap"]["failed"] == 1


def test_live_lease_is_not_reaped(app: durq.Durq, clock: Clock) -> None:
    register(app)
    app.tasks["work"].enqueue()
    (c,) = claim(app)
    clock.advance(LEASE - 1)
    assert app.store.extend_leases([(c.id, c.lease_token)], LEASE) == []
    clock.advance(LEASE - 1)
    assert app.store.reap().recovered == 0


def test_retry_resets_attempts_and_keeps_history(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].options(max_attempts=1).enqueue()
    (c,) = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=err(1, "permanent"))])
    with pytest.raises(durq.JobGone):
        app.cancel(job.id)
    again = app.retry(job.id)
    assert (again.state, again.attempts) == ("queued", 0)
    assert [e.kind for e in again.errors] == ["permanent", "replayed"]
    with pytest.raises(durq.JobGone):
        app.retry(job.id)
    with pytest.raises(durq.JobNotFound):
        app.retry(10_000)


def test_cancel_queued_and_running_fences_the_worker(app: durq.Durq) -> None:
    register(app)
    queued = app.tasks["work"].enqueue()
    assert app.cancel(queued.id).state == "cancelled"
    running = app.tasks["work"].enqueue()
    (c,) = claim(app)
    assert app.cancel(running.id).state == "cancelled"
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")]) == [False]
    assert app.store.extend_leases([(c.id, c.lease_token)], LEASE) == [(c.id, c.lease_token)]
    assert app.get(running.id).state == "cancelled"
    # the running attempt stays in the history, with its start and lease holder; a queued
    # job's cancel ended no attempt and adds nothing
    [entry] = app.get(running.id).errors
    assert (entry.kind, entry.attempt, entry.worker_id) == ("cancelled", 1, "w1")
    assert entry.started_at is not None
    assert app.get(queued.id).errors == []


def test_release_gives_back_the_first_free_requeues_then_charges(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].options(max_attempts=2).enqueue()
    states = []
    later = app.tasks["other"].enqueue()  # given-back jobs keep their place ahead of it
    for _ in range(4):
        (c,) = claim(app, limit=1)
        assert c.id == job.id
        states.append(
            app.store.release(
                c.id, c.lease_token, 2, json.dumps(err(c.attempt, "shutdown").to_dict())
            )
        )
    # two free requeues (attempt handed back), then each one is charged; attempts run out.
    assert states == [("queued", 0), ("queued", 0), ("queued", 1), ("failed", 2)]
    assert [e.kind for e in app.get(job.id).errors] == ["shutdown", "shutdown"]
    assert app.get(later.id).state == "queued"


def test_idempotency_key_returns_the_first_job(app: durq.Durq) -> None:
    register(app)
    w = app.tasks["work"]
    first = w.options(key="order-1").enqueue(n=1)
    second = w.options(key="order-1").enqueue(n=2)
    assert second.id == first.id and second.payload == {"n": 1}
    other_queue = w.options(key="order-1", queue="q2").enqueue(n=3)
    assert other_queue.id != first.id
    many = w.enqueue_many([{"n": 4}, {"n": 5}, {"n": 6}], keys=["order-1", None, "order-2"])
    assert many[0].id == first.id
    assert len({j.id for j in many} | {first.id}) == 3
    assert len(app.jobs(limit=100)) == 4


def test_enqueue_many_is_one_transaction_and_keeps_order(app: durq.Durq) -> None:
    register(app)
    jobs = app.tasks["work"].enqueue_many([{"n": i} for i in range(500)])
    assert [j.payload["n"] for j in jobs] == list(range(500))
    assert [app.get(j.id).payload["n"] for j in jobs[::50]] == list(range(0, 500, 50))
    with pytest.raises(TypeError):
        app.tasks["work"].enqueue_many([{"n": 1}, {"n": object()}])
    assert len(app.jobs(limit=1000)) == 500


def test_an_enqueue_many_error_names_its_item_and_writes_nothing(app: durq.Durq) -> None:
    register(app)
    work = app.tasks["work"]
    items: list[Any] = [{"n": i} for i in range(5)]
    for bad, match in (
        ({"m": 1}, r"^item 3 of 5: payload does not fit work\(\)"),
        ({"n": float("nan")}, r"^item 3 of 5: payload key 'n'"),
        (7, r"^item 3 of 5: payload (could not be read as|must be) a dict"),
    ):
        with pytest.raises(durq.PayloadError, match=match):
            work.enqueue_many([*items[:3], bad, items[4]])
        with pytest.raises(durq.PayloadError, match=match.replace("5", "6", 1)):
            work.enqueue_many([*items[:3], bad, *items[3:]], keys=[f"k{i}" for i in range(6)])
    assert app.jobs(limit=10) == []


def test_attempts_and_backoff_survive_a_restart(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    (c,) = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "retry", error=err(1), delay=120)])
    app.close()
    reopened = make()
    register(reopened)
    row = reopened.get(job.id)
    assert (row.state, row.attempts) == ("scheduled", 1)
    assert abs(row.run_at - (clock.now + 120)) < 1.0
    assert claim(reopened) == []
    clock.advance(121)
    (again,) = claim(reopened)
    assert again.attempt == 2


def test_jobs_filters(app: durq.Durq, clock: Clock) -> None:
    register(app)
    a = app.tasks["work"].enqueue()
    b = app.tasks["other"].options(delay=30).enqueue()
    assert [j.id for j in app.jobs(state="queued")] == [a.id]
    assert [j.id for j in app.jobs(state="scheduled")] == [b.id]
    assert [j.id for j in app.jobs(task="other")] == [b.id]
    with pytest.raises(durq.ConfigError):
        app.jobs(state="bogus")


def test_a_retry_without_attempts_left_fails_the_job(app: durq.Durq) -> None:
    """The store bounds attempts itself, whatever a caller asks for."""
    register(app)
    job = app.tasks["work"].options(max_attempts=1).enqueue()
    (c,) = claim(app)
    assert app.store.finish([Outcome(c.id, c.lease_token, "retry", error=err(1), delay=0)]) == [
        True
    ]
    row = app.get(job.id)
    assert (row.state, row.attempts) == ("failed", 1)
    assert row.finished_at is not None
    assert claim(app) == []


def test_enqueue_many_stores_every_character_as_given(app: durq.Durq) -> None:
    """A chunk big enough for PostgreSQL's COPY path: text with the characters COPY's
    format escapes (backslash, tab, newline, carriage return) comes back unchanged, in the
    payload, the meta and the queue name, and so does an empty payload."""

    @app.task
    def echo(n: int, s: str = "") -> str:
        return s

    odd = "a\\b\tc\nd\re \\N \\. \u00e9 \u2028"
    items = [{"n": i, "s": odd * (i % 3)} for i in range(300)]
    items[7] = {"n": 7}
    jobs = echo.options(meta={"m": odd}, queue="q\\t1").enqueue_many(items)
    assert [j.payload for j in jobs] == items
    for job in [*jobs[::37], jobs[7], jobs[-1]]:
        stored = app.get(job.id)
        assert stored.payload == items[stored.payload["n"]]
        assert stored.meta == {"m": odd}
        assert stored.queue == "q\\t1"
    assert len(app.jobs(queue="q\\t1", limit=1000)) == 300


def test_a_copy_sized_insert_keeps_each_rows_own_columns(app: durq.Durq, clock: Clock) -> None:
    """Rows of one insert whose columns change in runs (queue, task, priority, delay or
    run_at, attempts, meta), large enough for PostgreSQL's COPY path: each row is stored
    with its own columns, and what the store returns for it is what it stored."""
    register(app)
    at = clock.now + 500.0
    news = []
    for i in range(360):
        news.append(
            NewJob(
                queue=("qa", "qb")[i // 50 % 2],
                task=("work", "other")[i // 7 % 2],
                payload=json.dumps({"n": i}),
                priority=i // 20 % 3,
                run_at=at if i % 13 == 0 else None,
                max_attempts=1 + i // 45 % 4,
                meta=None if i // 30 % 2 else json.dumps({"i": i // 30}),
                delay=30.0 if i // 11 % 2 else 0.0,
            )
        )
    inserted = app.store.enqueue(news)
    assert len(inserted) == len({i.id for i in inserted}) == 360
    for new, ins in zip(news, inserted, strict=True):
        row = app.store.get(ins.id)
        assert row is not None
        expected_run_at = new.run_at if new.run_at is not None else clock.now + new.delay
        assert (row.queue, row.task, row.payload, row.priority) == (
            new.queue, new.task, new.payload, new.priority
        )  # fmt: skip
        assert (row.max_attempts, row.meta, row.state) == (new.max_attempts, new.meta, "queued")
        assert row.run_at == pytest.approx(expected_run_at, abs=1e-3)
        assert (ins.created, ins.run_at, ins.created_at) == (True, row.run_at, row.created_at)


@pytest.mark.parametrize("count", [3, 450])
def test_enqueue_rows_writes_one_job_per_payload_in_order(
    app: durq.Durq, clock: Clock, count: int
) -> None:
    """The bulk path of enqueue_many (below and above PostgreSQL's COPY threshold): one
    new job per payload, in the payloads' order, each the template with its payload, all
    with the run_at and created_at returned; names and text outside ASCII are kept."""
    register(app)
    template = NewJob(
        queue="fila-\u00e9\u961f", task="work", payload="", priority=-3, run_at=None,
        max_attempts=7, meta=json.dumps({"m": "\u00e9"}, ensure_ascii=False), delay=45.0,
    )  # fmt: skip
    payloads = [json.dumps({"n": i, "s": "a\tb\\c" * (i % 2)}) for i in range(count)]
    seen: list[int] = []

    def build(rows: InsertedRows) -> InsertedRows:
        seen.extend(rows.ids)  # what the store returns is what it built
        return rows

    rows = app.store.enqueue_rows(template, payloads, build)
    assert seen == rows.ids
    assert len(rows.ids) == count and rows.ids == sorted(set(rows.ids))
    assert rows.created_at == pytest.approx(clock.now, abs=1e-3)
    assert rows.run_at == pytest.approx(clock.now + 45.0, abs=1e-3)
    for job_id, payload in [*zip(rows.ids, payloads, strict=True)][:: max(1, count // 40)]:
        row = app.store.get(job_id)
        assert row is not None
        assert (row.queue, row.task, row.payload, row.priority, row.max_attempts) == (
            template.queue, "work", payload, -3, 7
        )  # fmt: skip
        assert (row.meta, row.state, row.attempts) == (template.meta, "queued", 0)
        assert (row.run_at, row.created_at) == (rows.run_at, rows.created_at)
    assert len(app.jobs(queue=template.queue, limit=1000)) == count
    with pytest.raises(ValueError, match="plain"):
        app.store.enqueue_rows(NewJob("q", "work", "", 0, None, 1, key="k"), ["{}"], build)
    assert app.store.enqueue_rows(template, [], build).ids == []
