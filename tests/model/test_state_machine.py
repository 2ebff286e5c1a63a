"""Model-based test of durq's job state machine (DESIGN §1-§2), on every backend.

A Hypothesis ``RuleBasedStateMachine`` drives random sequences of store calls and runs the
same sequence on the pure-Python model in :mod:`tests.model.queue_model` (the transition
table of ``docs/architecture.md``). The calls:

- enqueue (max_attempts 1-3, an optional delay, an optional idempotency key from a small set);
- claim (limit 1-3) by one of two workers, and the worker's hot path ``finish_and_claim``;
- heartbeat: a worker extends every lease it believes it holds, stale ones included;
- finish (succeeded, a transient error that retries with delay 0 or a few seconds while
  attempts are left and fails otherwise - the executor's rule -, a permanent error), one
  at a time or grouped, by the worker that believes it holds the lease (maybe stale);
- progress writes by that worker;
- writes with a stale token (one that was issued for the job and no longer holds): finish,
  retry, fail, extend, progress, release;
- shutdown: a worker releases everything it holds (``free_requeues=2``, sometimes 0 so that
  charged give-backs are reached within a short run) and forgets it;
- reap, ``Durq.retry``, ``Durq.cancel`` (also of unknown ids), clock advance 0-40 s
  (the lease is 30 s; the periodic reaper may run after it), and a worker crash (the
  worker forgets its leases for good).

On PostgreSQL ``finish_and_claim`` is one statement whose CTEs share a snapshot, so its
claim cannot take a job its own outcome just sent back to the queue; on SQLite it can. The
model follows each backend there (``Databases.claim_sees_own_outcomes``).

Checked after every step (``@invariant``):

- the store agrees with the model for every job: state (``scheduled`` derived from
  ``run_at``), attempts, max_attempts, run_at, lease token and expiry, worker id, key,
  started/finished times, result, progress, shutdown give-backs and the error history as
  (attempt, kind) pairs;
- each job is in exactly one state: listing by each state partitions the ids;
- attempts never exceed max_attempts; a running job has a lease and only a running job has;
- no job is ever lost: the ids only grow, no id disappears, none appears unannounced.

Checked inside the rules: a claim takes exactly the jobs the model says are due, in
(priority, run_at, id) order, never a terminal job (unless it was retried), and every
claim hands out a token never seen before for that job; a stale token never changes a row
(finish/extend/progress/release return False / the id / None and the row is unchanged);
an idempotency key returns the first job.

Left out on purpose: priorities other than 0, several queues, pausing, deadlines (the
``expired`` state is only reachable through features not modelled), parked jobs, batches,
``enqueue_many``, the outbox and concurrency between processes (covered elsewhere).

``DURQ_MODEL_EXAMPLES`` (default 150 on SQLite, 50 on PostgreSQL, 50 steps each) and
``DURQ_MODEL_STEPS`` raise the effort for soak runs; a soak run (either variable set) is
randomised, a normal run derandomised (the same examples every time).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import durq
from durq.model import AttemptError, JobRecord, JobState, Outcome
from tests.conftest import PG_URL, Clock, require_pg
from tests.model.queue_model import ModelJob, QueueModel

LEASE = 30.0
FREE_REQUEUES = 2
QUEUE = "default"
TASK = "work"
WORKERS = ("w1", "w2")
KEYS = ("k1", "k2", "k3")

#: Examples per backend in a normal run: SQLite is cheap (~2 s per 100), PostgreSQL is not
#: (~20 s per 80: a schema is created and migrated per example).
DEFAULT_EXAMPLES = {"sqlite": 150, "postgres": 50}
SOAK = "DURQ_MODEL_EXAMPLES" in os.environ or "DURQ_MODEL_STEPS" in os.environ


def model_settings(backend: str) -> settings:
    return settings(
        max_examples=int(os.environ.get("DURQ_MODEL_EXAMPLES", DEFAULT_EXAMPLES[backend])),
        stateful_step_count=int(os.environ.get("DURQ_MODEL_STEPS", "50")),
        deadline=None,
        database=None,  # nothing written into the repository
        derandomize=not SOAK,  # CI runs the same examples every time; soak runs explore
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


# -- databases: a fresh one per example ------------------------------------------------------


class Databases:
    """Hands out a fresh, empty database URL per Hypothesis example and drops it after."""

    backend = ""

    #: Whether ``finish_and_claim`` can claim a job its own outcomes just sent back to the
    #: queue: SQLite runs the statements in turn in one transaction, PostgreSQL runs one
    #: statement whose CTEs share one snapshot (documented in its queries.py).
    claim_sees_own_outcomes = True

    def new(self) -> str:
        raise NotImplementedError

    def drop(self, url: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Drop whatever is left."""


class SqliteDatabases(Databases):
    backend = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = 0

    def new(self) -> str:
        self.count += 1
        return f"sqlite:///{self.directory / f'example-{self.count}.db'}"

    def drop(self, url: str) -> None:
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


class PostgresDatabases(Databases):
    """A schema of its own per example (``t_model_<run>_<n>``), dropped after the example."""

    backend = "postgres"
    claim_sees_own_outcomes = False

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:10]
        self.count = 0
        self.live: set[str] = set()

    def new(self) -> str:
        self.count += 1
        schema = f"t_model_{self.run}_{self.count}"
        self.live.add(schema)
        sep = "&" if "?" in PG_URL else "?"
        return f"{PG_URL}{sep}schema={schema}&pool_size=2"

    def drop(self, url: str) -> None:
        schema = url.split("schema=")[1].split("&")[0]
        self._drop(schema)
        self.live.discard(schema)

    def _drop(self, schema: str) -> None:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def close(self) -> None:
        for schema in sorted(self.live):
            with contextlib.suppress(Exception):
                self._drop(schema)
        self.live.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Databases]:
    """Like the conformance suite's ``backend_url``, but one database per example."""
    dbs: Databases
    if request.param == "sqlite":
        dbs = SqliteDatabases(tmp_path)
    else:
        require_pg()  # skips locally without a server, fails under CI=true
        dbs = PostgresDatabases()
    yield dbs
    dbs.close()


# -- helpers ---------------------------------------------------------------------------------


def error_json(attempt: int, kind: str, now: float) -> str:
    return json.dumps(AttemptError(attempt, now, "Shutdown", "shut down", "", kind).to_dict())


def history(record: JobRecord) -> list[tuple[int, str]]:
    return [(int(e["attempt"]), str(e["kind"])) for e in json.loads(record.errors)]


def visible_state(record: JobRecord, now: float) -> str:
    if record.state == JobState.QUEUED and record.run_at > now:
        return JobState.SCHEDULED
    return record.state


def differences(record: JobRecord, job: ModelJob, now: float) -> list[str]:
    """Where the stored row and the model's job disagree (empty when they agree)."""
    pairs: dict[str, tuple[Any, Any]] = {
        "state": (visible_state(record, now), job.visible_state(now)),
        "attempts": (record.attempts, job.attempts),
        "max_attempts": (record.max_attempts, job.max_attempts),
        "run_at": (record.run_at, job.run_at),
        "lease_token": (record.lease_token, job.token),
        "lease_expires_at": (record.lease_expires_at, job.lease_expires_at),
        "worker_id": (record.worker_id, job.worker_id),
        "key": (record.key, job.key),
        "created_at": (record.created_at, job.created_at),
        "started_at": (record.started_at, job.started_at),
        "finished_at": (record.finished_at, job.finished_at),
        "result": (record.result, job.result),
        "progress": (record.progress, job.progress),
        "shutdown_requeues": (record.shutdown_requeues, job.shutdown_requeues),
        "errors": (history(record), job.errors),
    }
    return [
        f"job {job.id} {name}: store {got!r}, model {want!r}"
        for name, (got, want) in pairs.items()
        if got != want
    ]


# -- the machine -----------------------------------------------------------------------------


class QueueMachine(RuleBasedStateMachine):
    """Runs random store calls on a real backend and on :class:`QueueModel` side by side."""

    databases: Databases  # set by the test on a subclass

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.url = self.databases.new()
        self.app: durq.Durq | None = durq.Durq(self.url, clock=self.clock)
        self.model = QueueModel(now=self.clock.now, lease=LEASE)
        # What each worker believes it holds: job id -> (token, attempt). A worker runs one
        # attempt per job (the real worker keys its in-flight attempts by job id).
        self.held: dict[str, dict[int, tuple[int, int]]] = {w: {} for w in WORKERS}
        self.seen_ids: set[int] = set()

    @property
    def dq(self) -> durq.Durq:
        assert self.app is not None
        return self.app

    def teardown(self) -> None:
        if self.app is not None:
            self.app.close()
            self.app = None
        self.databases.drop(self.url)

    # -- helpers ------------------------------------------------------------------------------

    def _row(self, job_id: int) -> JobRecord:
        record = self.dq.store.get(job_id)
        assert record is not None, f"job {job_id} is gone from the store"
        return record

    def _check_job(self, job_id: int) -> None:
        problems = differences(self._row(job_id), self.model.job(job_id), self.model.now)
        assert not problems, "\n".join(problems)

    def _take(
        self, worker: str, claimed: list[Any], limit: int, unseen: frozenset[int] = frozenset()
    ) -> None:
        """Check a claim's result against the model's ready set, then apply it."""
        want = self.model.ready(limit, exclude=unseen)
        got = [c.id for c in claimed]
        assert got == want, f"{worker} claimed {got}, the model expected {want}"
        for c in claimed:
            job = self.model.job(c.id)
            assert job.state == "queued", f"claimed job {c.id} which is {job.state}"
            assert c.lease_token not in self.model.tokens[c.id], (
                f"job {c.id} got token {c.lease_token} a second time"
            )
            attempt = self.model.claim(c.id, c.lease_token, worker)
            assert (c.attempt, c.max_attempts, c.shutdown_requeues) == (
                attempt,
                job.max_attempts,
                job.shutdown_requeues,
            ), f"claim of job {c.id}: {c}"
            self.held[worker][c.id] = (c.lease_token, c.attempt)
            self._check_job(c.id)

    def _outcome(
        self, job_id: int, token: int, attempt: int, max_attempts: int, kind: str, delay: float
    ) -> tuple[Outcome, tuple[int, str] | None]:
        """The outcome the executor would record: a transient error retries while attempts
        are left (as the worker believes them) and fails the job otherwise."""
        now = self.model.now
        if kind == "succeeded":
            return Outcome(job_id, token, "succeeded", result=f'"done {job_id}"'), None
        classification = "transient" if kind == "transient" else "permanent"
        error = AttemptError(attempt, now, "ValueError", "boom", "", classification)
        if kind == "transient" and attempt < max_attempts:
            return Outcome(job_id, token, "retry", error=error, delay=delay), (
                attempt,
                classification,
            )
        return Outcome(job_id, token, "failed", error=error), (attempt, classification)

    def _apply(self, outcome: Outcome, error: tuple[int, str] | None) -> bool:
        return self.model.finish(
            outcome.job_id, outcome.lease_token, outcome.kind, outcome.delay, error
        )

    def _pick_held(self, data: st.DataObject, worker: str) -> tuple[int, int, int]:
        job_id = data.draw(st.sampled_from(sorted(self.held[worker])), label="job")
        token, attempt = self.held[worker][job_id]
        return job_id, token, attempt

    def _holds_any(self) -> bool:
        return any(self.held.values())

    # -- rules --------------------------------------------------------------------------------

    @initialize(max_attempts=st.lists(st.integers(1, 3), min_size=1, max_size=4))
    def some_ready_jobs(self, max_attempts: list[int]) -> None:
        """Start with a few due jobs, so that short runs reach claims and leases too."""
        for n in max_attempts:
            self.enqueue(n, None, None)

    @rule(
        max_attempts=st.integers(1, 3),
        delay=st.sampled_from([None, 0, 0, 3, 15, 45]),
        key=st.one_of(st.none(), st.sampled_from(KEYS)),
        park=st.sampled_from([False, False, False, True]),
    )
    def enqueue(
        self, max_attempts: int, delay: float | None, key: str | None, park: bool = False
    ) -> None:
        before = self.model.existing_for_key(key)
        snapshot = self._row(before) if before is not None else None
        job = self.dq.enqueue(TASK, {}, delay=delay, key=key, max_attempts=max_attempts, park=park)
        if before is not None:
            assert job.id == before, f"key {key!r} gave job {job.id}, first job was {before}"
            assert self._row(before) == snapshot, "a repeated key changed the first job"
            return
        assert job.id not in self.seen_ids, f"new job reused id {job.id}"
        self.model.enqueue(job.id, max_attempts, float(delay or 0), key, park)
        self.seen_ids.add(job.id)
        assert (job.state, job.attempts) == (
            self.model.job(job.id).visible_state(self.model.now),
            0,
        )
        self._check_job(job.id)

    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def claim(self, worker: str, limit: int) -> None:
        claimed = self.dq.store.claim(QUEUE, [TASK], limit, LEASE, worker)
        self._take(worker, claimed, limit)

    @precondition(lambda self: self._holds_any())
    @rule(
        data=st.data(),
        kind=st.sampled_from(["succeeded", "transient", "permanent"]),
        delay=st.sampled_from([0.0, 4.0]),
        limit=st.integers(0, 3),
    )
    def finish_and_claim(self, data: st.DataObject, kind: str, delay: float, limit: int) -> None:
        """The worker's hot path: record one outcome and claim in one transaction."""
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        job_id, token, attempt = self._pick_held(data, worker)
        max_attempts = self.model.job(job_id).max_attempts
        outcome, error = self._outcome(job_id, token, attempt, max_attempts, kind, delay)
        applied, claimed = self.dq.store.finish_and_claim(
            [outcome], [QUEUE], [TASK], limit, LEASE, worker
        )
        del self.held[worker][job_id]
        assert applied == [self._apply(outcome, error)], f"finish {outcome} applied={applied}"
        # On PostgreSQL the claim sees the rows as they were before this statement: a job
        # this very outcome took out of `running` is not claimable in the same call.
        hidden = applied[0] and not self.databases.claim_sees_own_outcomes
        unseen = frozenset([job_id]) if hidden else frozenset()
        if limit > 0:
            self._take(worker, claimed, limit, unseen)
        else:
            assert claimed == []

    @precondition(lambda self: self._holds_any())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        leases = [(job_id, token) for job_id, (token, _) in sorted(self.held[worker].items())]
        lost = self.dq.store.extend_leases(leases, LEASE)
        want = self.model.extend(leases)
        assert lost == want, f"heartbeat of {leases}: lost {lost}, the model expected {want}"

    @precondition(lambda self: self._holds_any())
    @rule(
        data=st.data(),
        kind=st.sampled_from(["succeeded", "transient", "permanent"]),
        delay=st.sampled_from([0.0, 4.0]),
    )
    def finish(self, data: st.DataObject, kind: str, delay: float) -> None:
        """The believed holder (maybe stale) records one outcome and forgets the lease."""
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        job_id, token, attempt = self._pick_held(data, worker)
        max_attempts = self.model.job(job_id).max_attempts
        outcome, error = self._outcome(job_id, token, attempt, max_attempts, kind, delay)
        applied = self.dq.store.finish([outcome])
        del self.held[worker][job_id]
        assert applied == [self._apply(outcome, error)], f"finish {outcome} applied={applied}"

    @precondition(lambda self: self._holds_any())
    @rule(data=st.data(), delay=st.sampled_from([0.0, 4.0]))
    def finish_grouped(self, data: st.DataObject, delay: float) -> None:
        """A completer's batch: every lease of one worker, mixed outcomes, one transaction."""
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        pairs: list[tuple[Outcome, tuple[int, str] | None]] = []
        for job_id, (token, attempt) in sorted(self.held[worker].items()):
            kind = data.draw(st.sampled_from(["succeeded", "transient", "permanent"]), label="kind")
            max_attempts = self.model.job(job_id).max_attempts
            pairs.append(self._outcome(job_id, token, attempt, max_attempts, kind, delay))
        applied = self.dq.store.finish([o for o, _ in pairs])
        self.held[worker].clear()
        want = [self._apply(o, e) for o, e in pairs]
        assert applied == want, f"grouped finish: applied {applied}, the model expected {want}"

    @precondition(lambda self: self._holds_any())
    @rule(data=st.data(), fraction=st.sampled_from([0.25, 0.5, 1.0]))
    def progress(self, data: st.DataObject, fraction: float) -> None:
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        job_id, token, _ = self._pick_held(data, worker)
        value = json.dumps({"fraction": fraction, "by": worker, "token": token})
        ok = self.dq.store.set_progress(job_id, token, value)
        assert ok == self.model.set_progress(job_id, token, value)

    @precondition(lambda self: bool(self.model.stale_tokens()))
    @rule(
        data=st.data(),
        op=st.sampled_from(["succeeded", "retry", "failed", "extend", "progress", "release"]),
    )
    def stale_write(self, data: st.DataObject, op: str) -> None:
        """An old token (e.g. a worker that paused past its lease) writes: nothing changes."""
        job_id, token = data.draw(st.sampled_from(self.model.stale_tokens()), label="stale")
        before = self._row(job_id)
        store = self.dq.store
        err = AttemptError(1, self.model.now, "ValueError", "late", "", "transient")
        if op == "succeeded":
            assert store.finish([Outcome(job_id, token, op, result='"late"')]) == [False]
        elif op in ("retry", "failed"):
            assert store.finish([Outcome(job_id, token, op, error=err, delay=0)]) == [False]
        elif op == "extend":
            assert store.extend_leases([(job_id, token)], LEASE) == [(job_id, token)]
        elif op == "progress":
            assert store.set_progress(job_id, token, '{"fraction": 0.99}') is False
        else:
            assert store.release(job_id, token, FREE_REQUEUES, error_json(1, "shutdown", 0)) is None
        after = self._row(job_id)
        assert after == before, f"stale token {token} ({op}) changed job {job_id}"

    @precondition(lambda self: self._holds_any())
    @rule(data=st.data(), free=st.sampled_from([FREE_REQUEUES, FREE_REQUEUES, 0]))
    def shutdown(self, data: st.DataObject, free: int) -> None:
        """A worker stops: it releases every lease it believes it holds and forgets them.

        ``free`` is the worker's ``free_requeues``: mostly the default (2), sometimes 0 (a
        worker configured to charge every give-back), so that charged releases are reached.
        """
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]), label="worker")
        for job_id, (token, attempt) in sorted(self.held[worker].items()):
            got = self.dq.store.release(
                job_id, token, free, error_json(attempt, "shutdown", self.model.now)
            )
            want = self.model.release(job_id, token, free, (attempt, "shutdown"))
            assert got == want, f"release of job {job_id}: store {got}, model {want}"
        self.held[worker].clear()

    @precondition(lambda self: self._holds_any())
    @rule(worker=st.sampled_from(WORKERS))
    def crash(self, worker: str) -> None:
        """``kill -9``: the worker never uses its leases again; the reaper must recover them."""
        self.held[worker].clear()

    @precondition(lambda self: any(j.state == "running" for j in self.model.jobs.values()))
    @rule()
    def reap(self) -> None:
        self._reap()

    def _reap(self) -> None:
        summary = self.dq.store.reap()
        recovered, failed = self.model.reap()
        assert (summary.recovered, summary.failed) == (len(recovered), len(failed)), summary
        assert summary.job_ids == tuple(sorted(recovered + failed)), summary

    @rule(data=st.data(), action=st.sampled_from(["retry", "cancel", "adopt"]))
    def steer(self, data: st.DataObject, action: str) -> None:
        """``Durq.retry``, ``Durq.cancel`` or ``Durq.adopt`` of a job (or of an id that does
        not exist)."""
        missing = max(self.seen_ids, default=0) + 1000
        job_id = data.draw(st.sampled_from([*sorted(self.model.jobs), missing]), label="job")
        call = {"retry": self.dq.retry, "cancel": self.dq.cancel, "adopt": self.dq.adopt}[action]
        if job_id == missing:
            with pytest.raises(durq.JobNotFound):
                call(job_id)
            return
        before = self._row(job_id)
        if action == "retry" and self.model.retry(job_id):
            job = call(job_id)
            assert (job.state, job.attempts) == ("queued", 0), job
        elif action == "cancel" and self.model.cancel(job_id):
            assert call(job_id).state == "cancelled"
        elif action == "adopt" and self.model.adopt(job_id):
            assert call(job_id).state == self.model.job(job_id).visible_state(self.model.now)
        else:
            with pytest.raises(durq.JobGone):
                call(job_id)
            assert self._row(job_id) == before, f"a refused {action} changed job {job_id}"

    @rule(
        seconds=st.one_of(st.sampled_from([31, 30]), st.integers(0, 40)),
        reaper_runs=st.booleans(),
    )
    def advance(self, seconds: int, reaper_runs: bool) -> None:
        """Time passes (0-40 s; the lease's edge, 30 and 31 s, often), and the periodic
        reaper may run at the end of it."""
        self.clock.advance(seconds)
        self.model.advance(seconds)
        if reaper_runs:
            self._reap()

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        if self.app is None:
            return
        assert self.clock.now == self.model.now
        rows = {
            r.id: r
            for r in self.dq.store.list_jobs(state=None, queue=None, task=None, limit=10_000)
        }
        assert set(rows) == self.seen_ids == set(self.model.jobs), (
            f"store ids {sorted(rows)}, ids handed out {sorted(self.seen_ids)}"
        )
        problems: list[str] = []
        for job_id, record in rows.items():
            problems += differences(record, self.model.job(job_id), self.model.now)
            assert record.attempts <= record.max_attempts, f"job {job_id}: {record}"
            assert (record.state == "running") == (record.lease_token is not None), record
            assert (record.state == "running") == (record.lease_expires_at is not None), record
        assert not problems, "\n".join(problems)

    @invariant()
    def each_job_in_exactly_one_state(self) -> None:
        if self.app is None:
            return
        owner: dict[int, str] = {}
        for state in JobState:
            for job in self.dq.jobs(state=state.value, limit=10_000):
                assert job.id not in owner, f"job {job.id} is {owner[job.id]} and {state}"
                owner[job.id] = state.value
        assert set(owner) == self.seen_ids, f"listed by state: {sorted(owner)}"
        want = {i: j.visible_state(self.model.now) for i, j in self.model.jobs.items()}
        assert owner == want


# A failing example is shrunk for up to Hypothesis's own limit (about five minutes); the
# suite's 300 s timeout would kill that mid-query and lose the minimal example.
@pytest.mark.timeout(900)
def test_store_follows_the_model(databases: Databases) -> None:
    """Random call sequences on the store agree with the model and keep the invariants."""

    class Machine(QueueMachine):
        pass

    Machine.databases = databases
    run_state_machine_as_test(Machine, settings=model_settings(databases.backend))
