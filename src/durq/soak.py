"""``durq soak``: mixed work for a long time, workers killed and restarted, retention on.

A producer thread enqueues at a steady rate a mix of jobs (see :mod:`durq.soak_app`): fast,
slow, flaky (transient failures, then success), permanent failures, jobs that retry until
their attempts run out, sync and async tasks that overrun their timeout once, and jobs whose
deadline passes before they may run. Each job's expected terminal state and the runs it is
planned to take go into a ledger when it is enqueued.

Real ``durq worker durq.soak_app:dq`` processes (:class:`durq.verify.WorkerProcess`) run the
jobs with a short retention (``--retain STATE=AGE`` for every finished state,
``--prune-interval``), so finished jobs are deleted while the soak runs. Worker 0 is never
signalled (its RSS spans the whole run); the others get SIGKILL or SIGTERM at random moments
and a replacement is started at once.

The soak watches:

- every job id in the ledger must be seen by the soak in its expected terminal state before
  retention deletes it (the soak reads the finished jobs every :data:`OBSERVE_INTERVAL`
  seconds; retention is far longer). A job that vanishes without having been seen finished
  is **lost**; one that ends in another state is **wrong**; one still pending when the
  drain time is up is **stuck**;
- runs: each run appends ``start``/``end`` to a runs file (:mod:`durq.verify_app`). Runs
  beyond a job's plan are **duplicate runs**; they are allowed only when they began in a
  worker that was signalled, or when the job's history records a lost lease; any other is a
  contract violation;
- RSS of each worker (``VmRSS`` in ``/proc/<pid>/status``) every :data:`SAMPLE_INTERVAL`
  seconds: a worker that lived past the warm-up and whose RSS grew more than
  :data:`RSS_GROWTH_LIMIT` from its first sample after warm-up to its last is flagged;
- the database size (:meth:`durq.store.base.Store.storage_bytes`): after the warm-up, the
  largest size in the second half of the run must not exceed the largest in the first half
  by more than :data:`SIZE_GROWTH_LIMIT` plus :data:`SIZE_SLACK` bytes.

It reports each interval's finished jobs (throughput), pending jobs, kills, database size,
worker RSS and the load average, and ends with a PASS/FAIL line. Afterwards it deletes
its queue's jobs and the registrations of its workers, like ``durq verify``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from durq import soak_app
from durq.app import Durq
from durq.errors import ConfigError, DurqError
from durq.task import EnqueueOptions
from durq.verify import (
    ALL_STATES,
    STOP_TIMEOUT,
    TERMINAL_STATES,
    QueueNotEmpty,
    RunsLog,
    VerifyConfig,
    WorkerProcess,
    _interrupts_as_keyboard_interrupt,
    _shielded,
    absolute_url,
    shown_url,
    stop_all,
)
from durq.verify_app import PARENT_ENV, RUNS_ENV

#: Seconds between iterations of the main loop (kills, exits, runs file).
LOOP_INTERVAL = 0.1
#: Seconds between reads of the finished jobs (must stay far below the retention).
OBSERVE_INTERVAL = 1.0
#: Seconds between RSS and database-size samples.
SAMPLE_INTERVAL = 5.0
#: Seconds between producer batches (one enqueue transaction per kind group).
PRODUCE_INTERVAL = 0.25
#: Rows read per state when looking for finished jobs (retention keeps far fewer).
OBSERVE_LIMIT = 1_000_000
#: A worker's RSS may grow this much (0.5 = 50 %) from its first sample after warm-up.
RSS_GROWTH_LIMIT = 0.5
#: The database's size may grow this much between the halves of the run after warm-up ...
SIZE_GROWTH_LIMIT = 0.5
#: ... plus this many bytes (a few pages of WAL or free list are not growth).
SIZE_SLACK = 2 * 1024 * 1024
#: Attempts of ``exhausted`` jobs (each attempt fails; the job ends failed).
EXHAUSTED_ATTEMPTS = 3
#: ``expire`` jobs: they may run after this many seconds ...
EXPIRE_DELAY = 30.0
#: ... but their deadline is this many seconds after creation: they expire first.
EXPIRE_DEADLINE = 2.0
#: How many job ids a reason lists at most.
MAX_LISTED = 10


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of soak job: its share of the mix, where it goes, and what it must end as.

    Attributes:
        name: the ``kind`` (see :mod:`durq.soak_app`).
        weight: relative share of the jobs produced.
        task: the routing name.
        state: the terminal state it must reach.
        runs: the runs it is planned to take when nothing is killed (an upper bound for
            runs in workers that were never signalled).
    """

    name: str
    weight: float
    task: str
    state: str
    runs: int


#: The mix. Flaky jobs fail ``fail_times`` (1 or 2) times; their planned runs are counted
#: per job (``fail_times + 1``), the figure here is the most.
KINDS: tuple[Kind, ...] = (
    Kind("fast", 60, soak_app.WORK_TASK, "succeeded", 1),
    Kind("slow", 5, soak_app.WORK_TASK, "succeeded", 1),
    Kind("flaky", 12, soak_app.WORK_TASK, "succeeded", 3),
    Kind("permanent", 5, soak_app.WORK_TASK, "failed", 1),
    Kind("exhausted", 4, soak_app.WORK_TASK, "failed", EXHAUSTED_ATTEMPTS),
    Kind("timeout", 3, soak_app.TIMEOUT_TASK, "succeeded", 2),
    Kind("atimeout", 3, soak_app.ATIMEOUT_TASK, "succeeded", 2),
    Kind("expire", 8, soak_app.WORK_TASK, "expired", 0),
)
KIND_BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """How long and how hard to soak.

    Attributes:
        url: the database URL (``sqlite:///...``, a path, or ``postgresql://...``).
        seconds: how long the producer runs (> 0); the drain comes on top.
        rate: jobs enqueued per second (> 0).
        workers: worker processes alive at any time (>= 2: worker 0 is never signalled).
        concurrency: slots per worker (>= 1).
        lease: seconds a worker's claim lasts without a heartbeat (> 0).
        kill_every: (min, max) seconds between two signals, drawn uniformly.
        retain: seconds the pruner keeps finished jobs (every finished state; >= 10, far
            more than :data:`OBSERVE_INTERVAL`).
        prune_interval: seconds between the pruner's passes (> 0).
        report_every: seconds between progress lines (> 0).
        drain: seconds to wait after the producer stops for every job to finish (> 0).
        warmup: seconds of RSS and size growth ignored at the start (None: a quarter of
            the run, at most 60).
        queue: the queue the jobs go to; it must be empty.
        seed: seeds the mix, durations and kills (None: a random seed, reported).
    """

    url: str
    seconds: float = 600.0
    rate: float = 30.0
    workers: int = 3
    concurrency: int = 4
    lease: float = 5.0
    kill_every: tuple[float, float] = (5.0, 25.0)
    retain: float = 30.0
    prune_interval: float = 5.0
    report_every: float = 30.0
    drain: float = 120.0
    warmup: float | None = None
    queue: str = soak_app.QUEUE
    seed: int | None = None

    def check(self) -> None:
        """Raises:
        ConfigError: a figure out of range."""
        positive = {
            "seconds": self.seconds,
            "rate": self.rate,
            "lease": self.lease,
            "prune_interval": self.prune_interval,
            "report_every": self.report_every,
            "drain": self.drain,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"{name} must be > 0, not {value}")
        if self.workers < 2:
            raise ConfigError(
                f"workers must be >= 2 (worker 0 is never killed), not {self.workers}"
            )
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, not {self.concurrency}")
        low, high = self.kill_every
        if not 0 < low <= high:
            raise ConfigError(f"kill_every must be 0 < min <= max, not {self.kill_every}")
        if self.retain < 10 * OBSERVE_INTERVAL:
            raise ConfigError(
                f"retain must be >= {10 * OBSERVE_INTERVAL:g} s (the soak must see each job "
                f"finished before it is pruned), not {self.retain}"
            )
        if self.warmup is not None and self.warmup < 0:
            raise ConfigError(f"warmup must be >= 0, not {self.warmup}")

    @property
    def warmup_seconds(self) -> float:
        return self.warmup if self.warmup is not None else min(60.0, self.seconds / 4)


# -- what is watched ----------------------------------------------------------------------


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


def read_rss(pid: int) -> int | None:
    """The resident set size of ``pid`` in bytes (``VmRSS``), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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


# -- the producer -------------------------------------------------------------------------


class Producer(threading.Thread):
    """Enqueues ``rate`` jobs per second in small batches and writes each into the ledger.

    Args:
        url: the database URL.
        config: the soak's settings.
        rng: its own random generator (seeded from the soak's seed).
        ledger: job id -> :class:`Expect`, shared with the soak (guarded by ``lock``).
        pending: ids not yet seen finished (guarded by ``lock``).
        lock: guards ``ledger`` and ``pending``.
    """

    def __init__(
        self,
        url: str,
        config: SoakConfig,
        rng: random.Random,
        ledger: dict[int, Expect],
        pending: set[int],
        lock: threading.Lock,
    ) -> None:
        super().__init__(name="durq-soak-producer", daemon=True)
        self.app = Durq(url)
        self.config = config
        self.rng = rng
        self.ledger = ledger
        self.pending = pending
        self.lock = lock
        self.stop_event = threading.Event()
        self.enqueued = 0
        self.errors: list[str] = []
        self._weights = [k.weight for k in KINDS]

    def _item(self) -> tuple[str, dict[str, Any], Expect]:
        kind = self.rng.choices(KINDS, self._weights)[0]
        payload: dict[str, Any] = {}
        runs = kind.runs
        if kind.task == soak_app.WORK_TASK:
            payload = {"kind": kind.name}
            if kind.name == "fast":
                payload["ms"] = round(self.rng.uniform(1, 10), 2)
            elif kind.name == "slow":
                payload["ms"] = round(self.rng.uniform(300, 2500), 1)
            elif kind.name == "flaky":
                payload["fail_times"] = self.rng.randint(1, 2)
                runs = payload["fail_times"] + 1
        return kind.name, payload, Expect(kind.name, kind.state, runs)

    def _options(self, kind: str) -> EnqueueOptions:
        if kind == "exhausted":
            return EnqueueOptions(queue=self.config.queue, max_attempts=EXHAUSTED_ATTEMPTS)
        if kind == "expire":
            return EnqueueOptions(
                queue=self.config.queue, delay=EXPIRE_DELAY, deadline_in=EXPIRE_DEADLINE
            )
        return EnqueueOptions(queue=self.config.queue)

    def produce(self, n: int) -> None:
        """Enqueue ``n`` jobs: one transaction per group of kinds that share options."""
        groups: dict[tuple[str, str], list[tuple[dict[str, Any], Expect]]] = defaultdict(list)
        for _ in range(n):
            kind, payload, expect = self._item()
            task = KIND_BY_NAME[kind].task
            group = kind if kind in ("exhausted", "expire") else "default"
            groups[(task, group)].append((payload, expect))
        for (task, group), items in groups.items():
            opts = self._options(group)
            jobs = self.app.enqueue_many_with(
                task, [p for p, _ in items], opts, keys=None, task=None
            )
            with self.lock:
                for job, (_, expect) in zip(jobs, items, strict=True):
                    self.ledger[job.id] = expect
                    self.pending.add(job.id)
            self.enqueued += len(jobs)

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop_event.is_set():
            due = int(self.config.rate * (time.monotonic() - started)) - self.enqueued
            if due > 0:
                try:
                    self.produce(due)
                except DurqError as exc:  # e.g. a busy database: report it, go on
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop_event.wait(PRODUCE_INTERVAL)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        self.app.close()


# -- the report ---------------------------------------------------------------------------


@dataclass(slots=True)
class SoakReport:
    """The outcome of one soak (see :meth:`to_dict` for the figures)."""

    url: str
    queue: str
    config: SoakConfig
    seed: int
    elapsed: float
    enqueued: int
    by_kind: dict[str, dict[str, int]]
    lost: list[int]
    wrong: list[tuple[int, str, str]]
    stuck: list[int]
    late_seen: int
    duplicate_runs: int
    duplicate_jobs: int
    from_signalled: int
    after_lost_lease: int
    violations: list[int]
    sigkills: int
    sigterms: int
    worker_exits: list[str]
    producer_errors: list[str]
    intervals: list[Interval]
    workers: list[WorkerSeries]
    db_samples: list[tuple[float, int]]
    db_errors: list[tuple[float, str]] = field(default_factory=list)
    workdir: str | None = None

    @property
    def warmup(self) -> float:
        return self.config.warmup_seconds

    def rss_flags(self) -> list[str]:
        """Workers whose RSS grew more than :data:`RSS_GROWTH_LIMIT` after the warm-up."""
        out = []
        for w in self.workers:
            g = w.growth(self.warmup)
            if g is not None and g > RSS_GROWTH_LIMIT:
                out.append(
                    f"worker {w.id} (pid {w.pid}) RSS grew {g:.0%} after warm-up "
                    f"({_mib(w.rss[0][1])} -> {_mib(w.rss[-1][1])})"
                )
        return out

    def db_bounded(self) -> tuple[bool | None, int, int]:
        """See :func:`size_bounded`; the warm-up lasts at least until retention has pruned
        twice (``retain + 2 * prune_interval``): before that the database only grows."""
        cfg = self.config
        return size_bounded(self.db_samples, max(self.warmup, cfg.retain + 2 * cfg.prune_interval))

    def reasons(self) -> list[str]:
        """Why the soak failed; empty when it passed."""
        out = []
        if self.lost:
            ids = ", ".join(map(str, self.lost[:MAX_LISTED]))
            out.append(f"{len(self.lost)} job(s) lost (gone before they were seen finished): {ids}")
        if self.wrong:
            shown = ", ".join(f"{i} {got} (expected {exp})" for i, got, exp in self.wrong[:5])
            out.append(f"{len(self.wrong)} job(s) ended in the wrong state: {shown}")
        if self.stuck:
            ids = ", ".join(map(str, self.stuck[:MAX_LISTED]))
            out.append(
                f"{len(self.stuck)} job(s) still pending {self.config.drain:g} s after the "
                f"producer stopped: {ids}"
            )
        if self.violations:
            ids = ", ".join(map(str, self.violations[:MAX_LISTED]))
            out.append(
                f"{len(self.violations)} job(s) ran more often than planned in workers nobody "
                f"signalled, without a lost lease (contract violation): {ids}"
            )
        out.extend(f"a worker exited on its own: {e}" for e in self.worker_exits)
        out.extend(self.rss_flags())
        bounded, first, second = self.db_bounded()
        if bounded is False:
            out.append(
                f"database size kept growing with retention on: {_mib(first)} (largest in the "
                f"first half after warm-up) -> {_mib(second)} (second half)"
            )
        return out

    @property
    def passed(self) -> bool:
        return not self.reasons()

    @property
    def finished(self) -> int:
        return sum(i.finished for i in self.intervals)

    def summary(self) -> str:
        """The final ``PASS: ...`` or ``FAIL: ...`` line."""
        bounded, _, _ = self.db_bounded()
        size = "not judged" if bounded is None else ("bounded" if bounded else "GROWING")
        figures = (
            f"{self.enqueued} jobs, lost {len(self.lost)}, wrong {len(self.wrong)}, "
            f"stuck {len(self.stuck)}, duplicate runs {self.duplicate_runs} "
            f"({len(self.violations)} unexplained), kills {self.sigkills} SIGKILL + "
            f"{self.sigterms} SIGTERM, db {size}, "
            f"{self.finished / self.elapsed if self.elapsed else 0:.0f} jobs/s"
        )
        if self.passed:
            return f"PASS: {figures}"
        return f"FAIL: {'; '.join(self.reasons())} ({figures})"

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (times in seconds, sizes in bytes)."""
        bounded, first, second = self.db_bounded()
        sizes = [b for _, b in self.db_samples]
        return {
            "passed": self.passed,
            "summary": self.summary(),
            "reasons": self.reasons(),
            "url": self.url,
            "queue": self.queue,
            "seed": self.seed,
            "seconds": self.config.seconds,
            "rate": self.config.rate,
            "workers": self.config.workers,
            "concurrency": self.config.concurrency,
            "lease": self.config.lease,
            "retain": self.config.retain,
            "prune_interval": self.config.prune_interval,
            "warmup": self.warmup,
            "elapsed": round(self.elapsed, 3),
            "enqueued": self.enqueued,
            "finished": self.finished,
            "by_kind": self.by_kind,
            "lost": len(self.lost),
            "lost_ids": self.lost[:100],
            "wrong": [{"id": i, "state": s, "expected": e} for i, s, e in self.wrong[:100]],
            "stuck": len(self.stuck),
            "stuck_ids": self.stuck[:100],
            "seen_only_at_the_end": self.late_seen,
            "duplicate_runs": self.duplicate_runs,
            "duplicate_jobs": self.duplicate_jobs,
            "duplicate_jobs_from_signalled_workers": self.from_signalled,
            "duplicate_jobs_after_lost_lease": self.after_lost_lease,
            "contract_violations": self.violations[:100],
            "sigkills": self.sigkills,
            "sigterms": self.sigterms,
            "worker_exits": self.worker_exits,
            "producer_errors": self.producer_errors[:20],
            "producer_error_count": len(self.producer_errors),
            "database_errors": [[round(t, 1), m] for t, m in self.db_errors[:20]],
            "database_error_count": len(self.db_errors),
            "intervals": [
                {
                    "t": round(i.t, 1),
                    "enqueued": i.enqueued,
                    "finished": i.finished,
                    "jobs_per_s": round(i.throughput, 1),
                    "pending": i.pending,
                    "kills": i.kills,
                    "db_bytes": i.db_bytes,
                    "worker_rss": list(i.rss),
                    "load1": round(i.load, 2),
                }
                for i in self.intervals
            ],
            "worker_rss": [
                {
                    "id": w.id,
                    "pid": w.pid,
                    "canary": w.canary,
                    "end": w.end,
                    "lived": round((w.rss[-1][0] - w.started) if w.rss else 0.0, 1),
                    "first": w.rss[0][1] if w.rss else None,
                    "last": w.rss[-1][1] if w.rss else None,
                    "max": max(b for _, b in w.rss) if w.rss else None,
                    "growth_after_warmup": _round(w.growth(self.warmup)),
                }
                for w in self.workers
            ],
            "db_bytes": {
                "first": sizes[0] if sizes else None,
                "last": sizes[-1] if sizes else None,
                "max": max(sizes) if sizes else None,
                "max_first_half_after_warmup": first,
                "max_second_half_after_warmup": second,
                "bounded": bounded,
                "samples": [[round(t, 1), b] for t, b in self.db_samples],
            },
            "workdir": self.workdir,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:.1f} MiB"


def interval_line(i: Interval) -> str:
    """One progress line."""
    rss = "/".join(f"{b / 1048576:.0f}" for b in i.rss) or "-"
    return (
        f"t={i.t:6.0f}s  enq {i.enqueued:5d}  fin {i.finished:5d} ({i.throughput:5.1f}/s)  "
        f"pending {i.pending:5d}  kills {i.kills:3d}  db {_mib(i.db_bytes):>9}  "
        f"rss MiB {rss}  load {i.load:.2f}"
    )


def report_tables(report: SoakReport) -> list[Table]:
    """The report as ``rich`` tables: summary, throughput over time, workers."""
    summary = Table(title="durq soak", title_justify="left")
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    bounded, first, second = report.db_bounded()
    sizes = [b for _, b in report.db_samples]
    kinds = ", ".join(f"{k} {v['enqueued']}" for k, v in report.by_kind.items())
    rows = [
        ("database", report.url),
        ("queue", report.queue),
        ("elapsed (produce + drain)", f"{report.elapsed:.0f} s"),
        ("enqueued", str(report.enqueued)),
        ("  by kind", kinds),
        ("finished (seen)", str(report.finished)),
        ("lost", str(len(report.lost))),
        ("wrong state", str(len(report.wrong))),
        ("stuck", str(len(report.stuck))),
        ("duplicate runs", str(report.duplicate_runs)),
        ("  jobs with extra runs", str(report.duplicate_jobs)),
        ("  explained by a signalled worker", str(report.from_signalled)),
        ("  explained by a lost lease", str(report.after_lost_lease)),
        ("  unexplained", str(len(report.violations))),
        ("kills", f"{report.sigkills} SIGKILL, {report.sigterms} SIGTERM"),
        ("producer errors", str(len(report.producer_errors))),
        ("database errors (soak's own reads)", str(len(report.db_errors))),
        (
            "database size first/max/last",
            " / ".join(_mib(x) for x in (sizes[0], max(sizes), sizes[-1])) if sizes else "-",
        ),
        (
            "database bounded",
            "not judged (run too short)"
            if bounded is None
            else f"{'yes' if bounded else 'NO'} ({_mib(first)} -> {_mib(second)})",
        ),
        ("workers x concurrency", f"{report.config.workers} x {report.config.concurrency}"),
        (
            "lease / retain / prune",
            f"{report.config.lease:g} s / {report.config.retain:g} s / "
            f"{report.config.prune_interval:g} s",
        ),
        ("seed", str(report.seed)),
    ]
    for name, value in rows:
        summary.add_row(name, value)

    over_time = Table(title="throughput over time", title_justify="left")
    for col in (
        "t (s)",
        "enqueued",
        "finished",
        "jobs/s",
        "pending",
        "kills",
        "db",
        "rss MiB",
        "load",
    ):
        over_time.add_column(col, justify="right")
    for i in report.intervals:
        over_time.add_row(
            f"{i.t:.0f}", str(i.enqueued), str(i.finished), f"{i.throughput:.1f}",
            str(i.pending), str(i.kills), _mib(i.db_bytes),
            "/".join(f"{b / 1048576:.0f}" for b in i.rss), f"{i.load:.2f}",
        )  # fmt: skip

    workers = Table(title="worker RSS (first -> last)", title_justify="left")
    for col in (
        "worker",
        "pid",
        "lived (s)",
        "ended",
        "first",
        "max",
        "last",
        "growth after warm-up",
    ):
        workers.add_column(col, justify="right")
    for w in report.workers:
        if not w.rss:
            continue
        g = w.growth(report.warmup)
        workers.add_row(
            w.id.rsplit("-", 1)[-1] + (" (never killed)" if w.canary else ""),
            str(w.pid), f"{w.rss[-1][0] - w.started:.0f}", w.end,
            _mib(w.rss[0][1]), _mib(max(b for _, b in w.rss)), _mib(w.rss[-1][1]),
            "-" if g is None else f"{g:+.0%}",
        )  # fmt: skip
    return [summary, over_time, workers]


# -- the run ------------------------------------------------------------------------------


class _Soak:
    """The state of one soak run (see :func:`run_soak`)."""

    def __init__(self, config: SoakConfig, url: str, seed: int, say: Callable[[str], None]):
        self.config = config
        self.url = url
        self.seed = seed
        self.say = say
        self.rng = random.Random(seed)
        self.app = Durq(url)
        self.lock = threading.Lock()
        self.ledger: dict[int, Expect] = {}
        self.pending: set[int] = set()
        self.seen: dict[int, Seen] = {}
        self.procs: list[WorkerProcess] = []
        self.live: list[WorkerProcess] = []
        self.stopping: list[tuple[WorkerProcess, float]] = []
        self.series: dict[int, WorkerSeries] = {}
        self.signalled: set[int] = set()
        self.sigkills = 0
        self.sigterms = 0
        self.exits: list[str] = []
        self.intervals: list[Interval] = []
        self.db_samples: list[tuple[float, int]] = []
        self.db_errors: list[tuple[float, str]] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="durq-soak-"))
        self.runs = RunsLog(self.workdir / "runs.txt")
        self.prefix = f"durq-soak-{os.getpid()}-{secrets.token_hex(3)}"
        self.counter = 0
        self.t0 = time.monotonic()
        self.producer: Producer | None = None

    # -- workers --

    def launch(self, canary: bool = False) -> WorkerProcess:
        cfg = self.config
        retain = [f"--retain={s}={cfg.retain:g}" for s in sorted(TERMINAL_STATES)]
        vc = VerifyConfig(self.url, queue=cfg.queue, concurrency=cfg.concurrency, lease=cfg.lease)
        env = {
            **os.environ,
            "DURQ_URL": self.url,
            RUNS_ENV: str(self.runs.path),
            PARENT_ENV: str(os.getpid()),
        }
        p = WorkerProcess(
            f"{self.prefix}-{self.counter}",
            self.url,
            vc,
            self.workdir,
            env,
            app_spec="durq.soak_app:dq",
            extra_args=[*retain, f"--prune-interval={cfg.prune_interval:g}"],
        )
        self.counter += 1
        self.procs.append(p)
        self.live.append(p)
        self.series[p.pid] = WorkerSeries(p.id, p.pid, self.now(), canary)
        return p

    def now(self) -> float:
        return time.monotonic() - self.t0

    def kill_one(self) -> None:
        victims = [p for p in self.live if not self.series[p.pid].canary]
        if not victims:
            return
        victim = self.rng.choice(victims)
        sig = self.rng.choice((signal.SIGKILL, signal.SIGTERM))
        self.signalled.add(victim.pid)
        self.live.remove(victim)
        if sig == signal.SIGKILL:
            self.sigkills += 1
            self.series[victim.pid].end = "SIGKILL"
            victim.kill()
        else:
            self.sigterms += 1
            self.series[victim.pid].end = "SIGTERM"
            with contextlib.suppress(ProcessLookupError):
                victim.proc.send_signal(signal.SIGTERM)
            self.stopping.append((victim, time.monotonic()))
        self.launch()

    def check_workers(self) -> None:
        for p in list(self.live):
            if not p.alive():
                self.live.remove(p)
                self.series[p.pid].end = f"exited {p.proc.returncode}"
                self.exits.append(f"pid {p.pid} exit code {p.proc.returncode}: {p.tail()}")
                if len(self.exits) <= 3 * self.config.workers:
                    self.launch(canary=self.series[p.pid].canary)
        for p, since in list(self.stopping):
            if not p.alive():
                self.stopping.remove((p, since))
            elif time.monotonic() - since > STOP_TIMEOUT:
                p.kill()  # it did not stop in time: as if SIGKILLed
                self.stopping.remove((p, since))

    # -- watching --

    def observe(self) -> int:
        """Record the jobs seen finished for the first time; returns how many."""
        with self.lock:
            if not self.pending:
                return 0
        found: dict[int, Seen] = {}
        at = self.now()
        for state in sorted(TERMINAL_STATES):
            rows = self.app.store.list_jobs(
                state=state, queue=self.config.queue, task=None, limit=OBSERVE_LIMIT
            )
            for r in rows:
                found[r.id] = Seen(r.state, r.attempts, _lease_lost(r.errors), at)
        n = 0
        with self.lock:
            for job_id in list(self.pending):
                s = found.get(job_id)
                if s is not None:
                    self.seen[job_id] = s
                    self.pending.discard(job_id)
                    n += 1
        return n

    def sample(self) -> None:
        t = self.now()
        for p in [*self.live, *(s for s, _ in self.stopping)]:
            rss = read_rss(p.pid)
            if rss is not None:
                self.series[p.pid].rss.append((t, rss))
        try:
            self.db_samples.append((t, self.app.store.storage_bytes()))
        except DurqError as exc:
            self.db_error(exc)

    def db_error(self, exc: DurqError) -> None:
        """A read of the soak itself failed (the database is down or busy): the soak goes
        on (workers and producer ride it out or fail on their own) and reports it."""
        message = f"{type(exc).__name__}: {exc}"
        if not self.db_errors or self.db_errors[-1][1] != message:
            self.say(f"t={self.now():.0f}s database error: {message}")
        self.db_errors.append((self.now(), message))

    def interval(self, since: float, enqueued: int, finished: int) -> Interval:
        with self.lock:
            pending = len(self.pending)
        rss = tuple(self.series[p.pid].rss[-1][1] for p in self.live if self.series[p.pid].rss)
        i = Interval(
            t=self.now(),
            enqueued=enqueued,
            finished=finished,
            seconds=self.now() - since,
            pending=pending,
            kills=self.sigkills + self.sigterms,
            db_bytes=self.db_samples[-1][1] if self.db_samples else 0,
            rss=rss,
            load=os.getloadavg()[0],
        )
        self.intervals.append(i)
        self.say(interval_line(i))
        return i

    # -- the loop --

    def run(self) -> SoakReport:
        cfg = self.config
        self.launch(canary=True)
        for _ in range(cfg.workers - 1):
            self.launch()
        self.producer = Producer(
            self.url,
            cfg,
            random.Random(self.rng.getrandbits(64)),
            self.ledger,
            self.pending,
            self.lock,
        )
        self.producer.start()
        self.say(
            f"soak: {cfg.seconds:g} s at {cfg.rate:g} jobs/s, {cfg.workers} workers x "
            f"{cfg.concurrency}, retain {cfg.retain:g} s, seed {self.seed}"
        )
        next_kill = self.now() + self.rng.uniform(*cfg.kill_every)
        next_observe = next_sample = 0.0
        next_report = cfg.report_every
        last_report, enq_mark, fin_mark = 0.0, 0, 0
        finished = 0
        producing = True
        drain_until = float("inf")
        while True:
            now = self.now()
            self.runs.poll()
            self.check_workers()
            if producing and now >= cfg.seconds:
                producing = False
                self.producer.stop()
                drain_until = now + cfg.drain
                self.say(f"producer stopped after {self.producer.enqueued} jobs; draining")
            if producing and now >= next_kill:
                self.kill_one()
                next_kill = now + self.rng.uniform(*cfg.kill_every)
            if now >= next_observe:
                try:
                    finished += self.observe()
                except DurqError as exc:  # e.g. the server restarts: note it, go on
                    self.db_error(exc)
                next_observe = now + OBSERVE_INTERVAL
            if now >= next_sample:
                self.sample()
                next_sample = now + SAMPLE_INTERVAL
            if now >= next_report:
                self.interval(last_report, self.producer.enqueued - enq_mark, finished - fin_mark)
                last_report, enq_mark, fin_mark = now, self.producer.enqueued, finished
                next_report = now + cfg.report_every
            if not producing:
                with self.lock:
                    done = not self.pending
                if done or now >= drain_until:
                    break
            time.sleep(LOOP_INTERVAL)
        self.sample()
        if self.now() > last_report:
            self.interval(last_report, self.producer.enqueued - enq_mark, finished - fin_mark)
        elapsed = self.now()
        stop_all([*self.live, *(p for p, _ in self.stopping)])
        self.runs.poll()
        return self.analyse(elapsed)

    def analyse(self, elapsed: float) -> SoakReport:
        assert self.producer is not None
        late = self.observe()  # those that finished between the last read and the stop
        lost: list[int] = []
        stuck: list[int] = []
        for job_id in sorted(self.pending):
            record = self.app.store.get(job_id)
            if record is None:
                lost.append(job_id)
            elif record.state in TERMINAL_STATES:  # cannot happen after observe(); be safe
                self.seen[job_id] = Seen(
                    record.state, record.attempts, _lease_lost(record.errors), self.now()
                )
            else:
                stuck.append(job_id)
        wrong = sorted(
            (i, s.state, self.ledger[i].state)
            for i, s in self.seen.items()
            if s.state != self.ledger[i].state
        )
        starts: dict[int, list[int]] = defaultdict(list)
        for r in self.runs.runs:
            if r.kind == "start":
                starts[r.job_id].append(r.pid)
        dup_runs = dup_jobs = from_signalled = after_lease = 0
        violations: list[int] = []
        for job_id, pids in starts.items():
            expect = self.ledger.get(job_id)
            if expect is None:
                continue
            extra = len(pids) - expect.runs
            if extra > 0:
                dup_runs += extra
                dup_jobs += 1
            live_runs = sum(1 for pid in pids if pid not in self.signalled)
            seen = self.seen.get(job_id)
            lease_lost = seen.lease_lost if seen else 0
            if live_runs > expect.runs + lease_lost:
                violations.append(job_id)
            elif extra > 0:
                if live_runs > expect.runs:
                    after_lease += 1
                else:
                    from_signalled += 1
        by_kind: dict[str, dict[str, int]] = {}
        counts = Counter(e.kind for e in self.ledger.values())
        for k in KINDS:
            ids = [i for i, e in self.ledger.items() if e.kind == k.name]
            by_kind[k.name] = {
                "enqueued": counts[k.name],
                "ok": sum(1 for i in ids if i in self.seen and self.seen[i].state == k.state),
                "runs": sum(len(starts.get(i, ())) for i in ids),
            }
        return SoakReport(
            url=shown_url(self.url),
            queue=self.config.queue,
            config=self.config,
            seed=self.seed,
            elapsed=elapsed,
            enqueued=len(self.ledger),
            by_kind=by_kind,
            lost=lost,
            wrong=wrong,
            stuck=stuck,
            late_seen=late,
            duplicate_runs=dup_runs,
            duplicate_jobs=dup_jobs,
            from_signalled=from_signalled,
            after_lost_lease=after_lease,
            violations=sorted(violations),
            sigkills=self.sigkills,
            sigterms=self.sigterms,
            worker_exits=self.exits,
            producer_errors=self.producer.errors,
            intervals=self.intervals,
            workers=list(self.series.values()),
            db_samples=self.db_samples,
            db_errors=self.db_errors,
        )

    def cleanup(self, keep_workdir: bool) -> None:
        """Stop every process, delete the queue's jobs and the workers' registrations, and
        remove the temp dir (kept when ``keep_workdir``). Every step runs; the first
        failure is re-raised at the end."""
        errors: list[BaseException] = []

        def step(fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - report every cleanup failure, go on
                errors.append(exc)
                self.say(f"cleanup: {type(exc).__name__}: {exc}")

        if self.producer is not None and self.producer.is_alive():
            step(self.producer.stop)
        step(lambda: stop_all(self.procs))
        step(lambda: self.app.purge(self.config.queue, states=(*ALL_STATES, "parked")))

        def unregister() -> None:
            for p in self.procs:
                self.app.store.unregister_worker(p.id)

        step(unregister)
        step(self.app.close)
        if not keep_workdir:
            step(lambda: shutil.rmtree(self.workdir, ignore_errors=True))
        if errors:
            raise errors[0]


def _lease_lost(errors: str) -> int:
    """How many entries of a job's error history (JSON text) are lost leases."""
    try:
        raw = json.loads(errors or "[]")
    except ValueError:
        return 0
    return sum(1 for e in raw if isinstance(e, dict) and e.get("kind") == "lease_lost")


def run_soak(config: SoakConfig, progress: Callable[[str], None] | None = None) -> SoakReport:
    """Run the soak described by ``config`` and clean up after it.

    Args:
        config: what to run.
        progress: called with a line at the start, every ``report_every`` seconds and when
            the producer stops.

    Returns:
        The :class:`SoakReport` (check :attr:`SoakReport.passed`). When it failed, the
        worker logs and the runs file are kept in :attr:`SoakReport.workdir`.

    Raises:
        ConfigError: a bad figure or URL.
        QueueNotEmpty: the queue already holds jobs (nothing was written).
        StoreError: the database cannot be opened or written.
        KeyboardInterrupt: Ctrl-C or SIGTERM; everything was cleaned up first.
    """
    config.check()
    say = progress or (lambda _line: None)
    url = absolute_url(config.url)
    seed = config.seed if config.seed is not None else secrets.randbits(32)
    probe = Durq(url)
    try:
        if probe.store.list_jobs(state=None, queue=config.queue, task=None, limit=1):
            raise QueueNotEmpty(
                f"queue {config.queue!r} in {shown_url(url)} already has jobs; durq soak runs "
                "only on an empty queue of its own (choose another --queue, or another database)"
            )
    finally:
        probe.close()
    soak: _Soak | None = None
    report: SoakReport | None = None
    keep = False
    try:
        with _interrupts_as_keyboard_interrupt():
            soak = _Soak(config, url, seed, say)
            report = soak.run()
            if not report.passed:
                report.workdir = str(soak.workdir)
                keep = True
            return report
    except Exception:
        if soak is not None:  # keep the worker logs for the post-mortem
            say(f"soak aborted; worker logs and runs file kept in {soak.workdir}")
            keep = True
        raise
    finally:
        if soak is not None:
            with _shielded():
                soak.cleanup(keep_workdir=keep)
