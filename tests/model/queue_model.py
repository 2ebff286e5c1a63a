"""A pure-Python model of durq's job state machine (DESIGN §2) as the stores implement it.

It knows nothing of durq or SQL: it is the transition table of ``docs/architecture.md``
written as plain Python, so that a test can run the same sequence of calls on a real store
and on this model and compare the rows afterwards.

Modelled per job: the stored state (``scheduled`` is derived: a ``queued`` job whose
``run_at`` is ahead of the clock), ``run_at``, ``attempts``, ``shutdown_requeues``, the
current lease (token, holder, expiry), ``started_at`` / ``finished_at``, ``result``,
``progress`` and the error history as ``(attempt, kind)`` pairs.

Transitions (every one that touches a running job is conditional on its lease token):

- enqueue: a new ``queued`` job (``parked`` with ``park=True``), ``run_at = now + delay``; a
  key already used on the queue returns the first job and writes nothing.
- adopt: ``parked`` becomes ``queued`` with ``run_at = max(run_at, now)``; any other state is
  refused.
- claim: ready jobs (``queued``, ``run_at <= now``) in ``(priority, run_at, id)`` order, up to
  the limit; each becomes ``running`` with ``attempts + 1``, a fresh token and a lease.
- extend: a held lease moves its expiry to ``now + lease``.
- finish: ``succeeded`` (result kept), ``retry`` (back to ``queued`` at ``now + delay``,
  error appended), ``failed`` (error appended).
- progress: a held lease writes ``progress``.
- release (shutdown): the first ``free`` give-backs hand the attempt back (no error), later
  ones keep it, append an error and fail the job when no attempts are left.
- reap: leases with ``expires < now`` go back to ``queued`` (attempt stays counted,
  ``lease_lost`` error appended) or to ``failed`` when ``attempts >= max_attempts``.
- release and reap keep the job's ``run_at``, so a recovered job keeps its place at the head
  of the queue (commit c851a2e).
- retry (replay): ``succeeded``/``failed``/``cancelled``/``expired`` back to ``queued`` now,
  attempts and give-backs reset to 0, result cleared, history kept plus one ``replayed``
  entry (its attempt: the attempts the run before used).
- cancel: ``parked``, ``queued`` (incl. scheduled) or ``running`` become ``cancelled``; the
  lease is revoked; a running job's attempt gets a ``cancelled`` history entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "expired"})
RETRYABLE = frozenset({"succeeded", "failed", "cancelled", "expired"})
CANCELLABLE = frozenset({"parked", "queued", "running"})


@dataclass(slots=True)
class ModelJob:
    """One job as the model believes the store holds it."""

    id: int
    max_attempts: int
    run_at: float
    created_at: float
    key: str | None = None
    state: str = "queued"
    attempts: int = 0
    shutdown_requeues: int = 0
    token: int | None = None
    lease_expires_at: float | None = None
    worker_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: str | None = None
    progress: str | None = None
    errors: list[tuple[int, str]] = field(default_factory=list)

    def visible_state(self, now: float) -> str:
        """The state users see: ``scheduled`` for a queued job whose run_at is ahead."""
        if self.state == "queued" and self.run_at > now:
            return "scheduled"
        return self.state

    def holds(self, token: int) -> bool:
        """True when ``token`` is this job's live lease token."""
        return self.state == "running" and self.token == token


@dataclass(slots=True)
class QueueModel:
    """All jobs of one queue (priority 0), with the clock and every token ever issued."""

    now: float
    lease: float = 30.0
    jobs: dict[int, ModelJob] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)

    # -- time and reading -------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def job(self, job_id: int) -> ModelJob:
        return self.jobs[job_id]

    def stale_tokens(self) -> list[tuple[int, int]]:
        """Every (job id, token) pair ever issued that no longer holds a lease."""
        return [
            (job_id, token)
            for job_id, issued in sorted(self.tokens.items())
            for token in issued
            if not self.jobs[job_id].holds(token)
        ]

    # -- transitions ------------------------------------------------------------------------

    def existing_for_key(self, key: str | None) -> int | None:
        """The job an enqueue with ``key`` returns instead of inserting, if any."""
        return None if key is None else self.keys.get(key)

    def enqueue(
        self, job_id: int, max_attempts: int, delay: float, key: str | None, park: bool = False
    ) -> ModelJob:
        """A new job with the id the store gave it (the caller checked the key was new)."""
        assert job_id not in self.jobs, f"store reused job id {job_id}"
        job = ModelJob(job_id, max_attempts, self.now + delay, self.now, key)
        if park:
            job.state = "parked"
        self.jobs[job_id] = job
        self.tokens[job_id] = []
        if key is not None:
            self.keys[key] = job_id
        return job

    def ready(self, limit: int, exclude: frozenset[int] = frozenset()) -> list[int]:
        """The ids a claim of ``limit`` takes: due queued jobs by (run_at, id), leaving out
        ``exclude`` (jobs a claim cannot see yet)."""
        due = [
            j
            for j in self.jobs.values()
            if j.state == "queued" and j.run_at <= self.now and j.id not in exclude
        ]
        due.sort(key=lambda j: (j.run_at, j.id))
        return [j.id for j in due[:limit]]

    def claim(self, job_id: int, token: int, worker_id: str) -> int:
        """Lease one ready job; returns its attempt number."""
        job = self.jobs[job_id]
        assert job.state == "queued" and job.run_at <= self.now
        job.state = "running"
        job.attempts += 1
        job.token = token
        job.lease_expires_at = self.now + self.lease
        job.worker_id = worker_id
        job.started_at = self.now
        self.tokens[job_id].append(token)
        return job.attempts

    def extend(self, leases: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Extend the held leases; returns the pairs (in order) whose token no longer holds."""
        lost: list[tuple[int, int]] = []
        for job_id, token in leases:
            job = self.jobs[job_id]
            if job.holds(token):
                job.lease_expires_at = self.now + self.lease
            else:
                lost.append((job_id, token))
        return lost

    def _drop_lease(self, job: ModelJob) -> None:
        job.token = None
        job.lease_expires_at = None

    def finish(
        self, job_id: int, token: int, kind: str, delay: float, error: tuple[int, str] | None
    ) -> bool:
        """Record an outcome under ``token``; False (and nothing changed) when it is stale."""
        job = self.jobs[job_id]
        if not job.holds(token):
            return False
        self._drop_lease(job)
        if kind == "succeeded":
            job.state = "succeeded"
            job.result = f'"done {job_id}"'
            job.finished_at = self.now
        elif kind == "retry":
            assert error is not None
            job.state = "queued"
            job.run_at = self.now + delay
            job.worker_id = None
            job.errors.append(error)
        else:
            assert error is not None
            job.state = "failed"
            job.finished_at = self.now
            job.errors.append(error)
        return True

    def set_progress(self, job_id: int, token: int, progress: str) -> bool:
        job = self.jobs[job_id]
        if not job.holds(token):
            return False
        job.progress = progress
        return True

    def release(
        self, job_id: int, token: int, free: int, error: tuple[int, str]
    ) -> tuple[str, int] | None:
        """Shutdown give-back; returns (state, attempts) or None when the token is stale."""
        job = self.jobs[job_id]
        if not job.holds(token):
            return None
        charged = job.shutdown_requeues >= free
        if charged:
            job.errors.append(error)
            if job.attempts >= job.max_attempts:
                job.state = "failed"
                job.finished_at = self.now
            else:
                job.state = "queued"
        else:
            job.attempts -= 1
            job.state = "queued"
        job.shutdown_requeues += 1
        job.worker_id = None
        self._drop_lease(job)
        return job.state, job.attempts

    def reap(self) -> tuple[list[int], list[int]]:
        """Expired leases: returns (ids requeued, ids failed), each sorted."""
        recovered: list[int] = []
        failed: list[int] = []
        for job in sorted(self.jobs.values(), key=lambda j: j.id):
            if job.state != "running":
                continue
            assert job.lease_expires_at is not None
            if not job.lease_expires_at < self.now:
                continue
            job.errors.append((job.attempts, "lease_lost"))
            if job.attempts >= job.max_attempts:
                job.state = "failed"
                job.finished_at = self.now
                failed.append(job.id)
            else:
                job.state = "queued"
                recovered.append(job.id)
            job.worker_id = None
            self._drop_lease(job)
        return recovered, failed

    def retry(self, job_id: int) -> bool:
        job = self.jobs[job_id]
        if job.state not in RETRYABLE:
            return False
        job.errors.append((job.attempts, "replayed"))  # how the run before ended
        job.state = "queued"
        job.attempts = 0
        job.shutdown_requeues = 0
        job.run_at = self.now
        job.finished_at = None
        job.result = None
        job.worker_id = None
        self._drop_lease(job)
        return True

    def adopt(self, job_id: int) -> bool:
        job = self.jobs[job_id]
        if job.state != "parked":
            return False
        job.state = "queued"
        job.run_at = max(job.run_at, self.now)
        return True

    def cancel(self, job_id: int) -> bool:
        job = self.jobs[job_id]
        if job.state not in CANCELLABLE:
            return False
        if job.state == "running":  # its attempt ends here: kept in the history
            job.errors.append((job.attempts, "cancelled"))
        job.state = "cancelled"
        job.finished_at = self.now
        self._drop_lease(job)
        return True
