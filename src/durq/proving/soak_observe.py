"""What ``durq soak`` watches: the ledger entry of each job (:class:`Expect`), the jobs seen
finished (:class:`Seen`), worker RSS over time (:class:`WorkerSeries`), the progress
intervals (:class:`Interval`), and the judgements made from them: whether the database size
stayed bounded (:func:`size_bounded`) and which runs beyond a job's plan nothing explains
(:func:`count_duplicates`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: Seconds between reads of the finished jobs (must stay far below the retention).
OBSERVE_INTERVAL = 1.0
#: Rows read per state when looking for finished jobs (retention keeps far fewer).
OBSERVE_LIMIT = 1_000_000
#: Seconds between RSS and database-size samples.
SAMPLE_INTERVAL = 5.0
#: A worker's RSS may grow this much (0.5 = 50 %) from its first sample after warm-up.
RSS_GROWTH_LIMIT = 0.5
#: The database's size may grow this much between the halves of the run after warm-up ...
SIZE_GROWTH_LIMIT = 0.5
#: ... plus this many bytes (a few pages of WAL or free list are not growth).
SIZE_SLACK = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Expect:
    """The ledger entry of one job: its kind, the state it must end in, its planned runs."""

    kind: str
    state: str
    runs: int


@dataclass(frozen=True, slots=True)
class Seen:
    """A job as the soak first saw it finished: state, attempts, lost leases, when (s)."""

    state: str
    attempts: int
    lease_lost: int
    at: float


@dataclass(slots=True)
class WorkerSeries:
    """One worker process's life and its RSS samples ``(seconds since start, bytes)``.

    ``end`` is how it ended: ``running`` (stopped at the end of the soak), ``SIGKILL``,
    ``SIGTERM``, or ``exited N`` (on its own: a failure).
    """

    id: str
    pid: int
    started: float
    canary: bool
    end: str = "running"
    rss: list[tuple[float, int]] = field(default_factory=list)

    def growth(self, warmup: float) -> float | None:
        """Relative RSS growth from the first sample at least ``warmup`` seconds into its
        life to its last sample (None: it did not live long enough to judge)."""
        later = [(t, b) for t, b in self.rss if t - self.started >= warmup]
        if len(later) < 2 or later[-1][0] - later[0][0] < max(warmup, SAMPLE_INTERVAL):
            return None
        base = later[0][1]
        return (later[-1][1] - base) / base if base else None


@dataclass(frozen=True, slots=True)
class Interval:
    """One progress report: seconds since start, jobs enqueued and finished during the
    interval, jobs pending at its end, kills so far, database bytes, the RSS of live
    workers (bytes), the 1-minute load average."""

    t: float
    enqueued: int
    finished: int
    seconds: float
    pending: int
    kills: int
    db_bytes: int
    rss: tuple[int, ...]
    load: float

    @property
    def throughput(self) -> float:
        return self.finished / self.seconds if self.seconds > 0 else 0.0


def size_bounded(
    samples: Sequence[tuple[float, int]], warmup: float
) -> tuple[bool | None, int, int]:
    """Judge whether the database size stayed bounded.

    Args:
        samples: ``(seconds since start, bytes)``.
        warmup: seconds ignored at the start (retention has not pruned anything yet).

    Returns:
        (bounded: None when there are too few samples after the warm-up, the largest size
        in the first half after warm-up, the largest in the second half).
    """
    later = [b for t, b in samples if t >= warmup]
    if len(later) < 4:
        return None, 0, 0
    half = len(later) // 2
    first, second = max(later[:half]), max(later[half:])
    return second <= first * (1 + SIZE_GROWTH_LIMIT) + SIZE_SLACK, first, second


def lease_lost(errors: str) -> int:
    """How many entries of a job's error history (JSON text) are lost leases."""
    try:
        raw = json.loads(errors or "[]")
    except ValueError:
        return 0
    return sum(1 for e in raw if isinstance(e, dict) and e.get("kind") == "lease_lost")


@dataclass(frozen=True, slots=True)
class Duplicates:
    """Runs beyond the plan of their jobs.

    Attributes:
        runs: runs beyond the plan, over all jobs.
        jobs: jobs with at least one such run.
        from_signalled: those jobs whose extra runs all began in workers that were signalled.
        after_lost_lease: those jobs with extra runs in workers nobody signalled, as many as
            their history has lost leases.
        violations: the ids of jobs with more runs in workers nobody signalled than their
            plan plus their lost leases (a contract violation), in order.
    """

    runs: int
    jobs: int
    from_signalled: int
    after_lost_lease: int
    violations: list[int]


def count_duplicates(
    starts: Mapping[int, Iterable[int]],
    ledger: Mapping[int, Expect],
    seen: Mapping[int, Seen],
    signalled: set[int],
) -> Duplicates:
    """Compare each job's runs with its plan.

    Args:
        starts: job id -> the pid of each ``start`` line of the runs file.
        ledger: job id -> its plan (jobs not in it are ignored).
        seen: job id -> how it was seen finished (for its lost leases).
        signalled: pids of the workers that were sent SIGKILL or SIGTERM.

    Returns:
        The :class:`Duplicates`.
    """
    dup_runs = dup_jobs = from_signalled = after_lease = 0
    violations: list[int] = []
    for job_id, job_pids in starts.items():
        expect = ledger.get(job_id)
        if expect is None:
            continue
        pids = list(job_pids)
        extra = len(pids) - expect.runs
        if extra > 0:
            dup_runs += extra
            dup_jobs += 1
        live_runs = sum(1 for pid in pids if pid not in signalled)
        s = seen.get(job_id)
        lost = s.lease_lost if s else 0
        if live_runs > expect.runs + lost:
            violations.append(job_id)
        elif extra > 0:
            if live_runs > expect.runs:
                after_lease += 1
            else:
                from_signalled += 1
    return Duplicates(dup_runs, dup_jobs, from_signalled, after_lease, sorted(violations))
