"""``durq verify``: prove on the user's own database that killed workers lose no job.

It enqueues N jobs of :mod:`durq.proving.verify_app`'s task on a queue of its own, runs them
on real ``durq worker`` processes, SIGKILLs a worker K times at random moments (starting a
replacement each time), waits until every job is terminal, and reports
(:mod:`durq.proving.verify_report`):

- jobs run (distinct jobs whose work ended at least once) and jobs succeeded (database);
- lost: jobs that did not end ``succeeded``;
- duplicated: jobs that started more than once, and whether each superseded start is
  explained by the contract (its process was killed, or the job's history records that its
  lease expired); an unexplained one is a contract violation;
- the worst recovery time: for each kill, seconds from the SIGKILL until every job the killed
  process had started but not finished was started again elsewhere (max over kills). This
  is about the lease plus up to one reaper interval (a recovered job keeps its place at
  the head of the queue);
- throughput.

Each run writes ``start``/``end`` lines to a file opened with ``O_APPEND`` (see
:mod:`durq.proving.runs`), so the figures come from what really ran, not from the database
alone. Afterwards it deletes every job of its queue (``Durq.purge``), the registrations of
the workers it started, its temporary directory and every process it started; on failure
and Ctrl-C too. Like ``durq enqueue``, it creates the database's schema if it is missing.
"""

from __future__ import annotations

import os
import random
import secrets
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from durq.app import Durq
from durq.checks import MAX_ATTEMPTS_LIMIT
from durq.errors import ConfigError
from durq.proving import session, verify_app
from durq.proving.processes import (
    WorkerPool,
    WorkerSpec,
    interrupts_as_keyboard_interrupt,
    shielded,
)
from durq.proving.report import shown_url
from durq.proving.runs import Run, RunsLog
from durq.proving.session import QueueNotEmpty
from durq.proving.verify_report import (
    Analysis,
    Kill,
    KillReport,
    VerifyReport,
    analyse,
    report_table,
)

__all__ = [
    "Analysis",
    "Kill",
    "KillReport",
    "QueueNotEmpty",
    "Run",
    "VerifyConfig",
    "VerifyReport",
    "analyse",
    "default_timeout",
    "report_table",
    "run_verify",
]

#: Jobs per ``enqueue_many`` transaction.
ENQUEUE_CHUNK = 500
#: Seconds between reads of the runs file (and kill decisions) in the main loop.
LOOP_INTERVAL = 0.02
#: Seconds between database checks for "every job is terminal".
DB_CHECK_INTERVAL = 0.2
#: Kills happen when this share of the jobs has been run, at uniform random points in it.
KILL_WINDOW = (0.05, 0.8)
#: Sleep of one job in milliseconds, drawn uniformly from this range with the seed.
JOB_MS = (1.0, 10.0)
#: Non-terminal states (``scheduled`` is derived from ``queued``).
PENDING_STATES = ("queued", "scheduled", "running")


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """What to verify and how hard.

    Attributes:
        url: the database URL (``sqlite:///...``, a path, or ``postgresql://...``).
        jobs: jobs to run (>= 1).
        kills: workers to SIGKILL during the run (>= 0).
        workers: worker processes alive at any time (>= 1).
        concurrency: slots per worker (>= 1).
        lease: seconds a worker's claim lasts without a heartbeat; a killed worker's jobs
            come back after about this long.
        queue: the queue the jobs go to; it must be empty.
        seed: seeds job durations and kill moments (None: a random seed, reported).
        timeout: seconds to wait for every job to be terminal (None: a bound computed from
            the other figures, see :func:`default_timeout`).
    """

    url: str
    jobs: int = 1000
    kills: int = 5
    workers: int = 2
    concurrency: int = 4
    lease: float = 2.0
    queue: str = "durq-verify"
    seed: int | None = None
    timeout: float | None = None

    def check(self) -> None:
        """Raises:
        ConfigError: a figure out of range."""
        if self.jobs < 1:
            raise ConfigError(f"jobs must be >= 1, not {self.jobs}")
        if self.kills < 0:
            raise ConfigError(f"kills must be >= 0, not {self.kills}")
        if self.workers < 1 or self.concurrency < 1:
            raise ConfigError("workers and concurrency must be >= 1")
        if not self.lease > 0:
            raise ConfigError(f"lease must be > 0 seconds, not {self.lease}")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, not {self.timeout}")


def default_timeout(config: VerifyConfig) -> float:
    """Seconds to wait for the jobs when ``--timeout`` is not given: 60, plus 20 ms per job,
    plus two leases and 5 s per kill (each kill delays its jobs by about one lease)."""
    return 60.0 + 0.02 * config.jobs + config.kills * (2 * config.lease + 5.0)


def run_verify(config: VerifyConfig, progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Run the verification described by ``config`` and clean up after it.

    Args:
        config: what to run.
        progress: called with a short line at each step (enqueued, each kill, done).

    Returns:
        The :class:`VerifyReport` (check :attr:`VerifyReport.passed`).

    Raises:
        ConfigError: a bad figure or URL.
        QueueNotEmpty: the queue already holds jobs (no job was written; like every
            writing verb, opening the database creates it or brings its schema up to date).
        StoreError: the database cannot be opened or written.
        KeyboardInterrupt: Ctrl-C or SIGTERM; everything was cleaned up first.
    """
    say, url, seed = session.begin(config, progress)
    rng = random.Random(seed)
    timeout = config.timeout if config.timeout is not None else default_timeout(config)
    app = Durq(url)
    task = verify_app.register(app)
    pool: WorkerPool | None = None
    enqueued = False
    workdir: Path | None = None
    try:
        with interrupts_as_keyboard_interrupt():
            session.require_empty(
                app,
                config.queue,
                f"queue {config.queue!r} in {shown_url(url)} already has jobs; durq verify "
                "runs only on an empty queue of its own (choose another --queue; a verify "
                "that was itself killed with SIGKILL leaves its jobs behind)",
            )
            workdir = Path(tempfile.mkdtemp(prefix="durq-verify-"))
            runs = RunsLog(workdir / "runs.txt")
            spec = WorkerSpec(
                verify_app.APP, url, config.queue, config.concurrency, config.lease, workdir,
                runs.path,
            )  # fmt: skip
            pool = WorkerPool(spec, f"durq-verify-{os.getpid()}-{secrets.token_hex(3)}")
            max_attempts = min(MAX_ATTEMPTS_LIMIT, config.kills + 10)
            bound = task.options(queue=config.queue, max_attempts=max_attempts)
            ids: set[int] = set()
            enqueued = True
            for start in range(0, config.jobs, ENQUEUE_CHUNK):
                n = min(ENQUEUE_CHUNK, config.jobs - start)
                items = [{"ms": round(rng.uniform(*JOB_MS), 3)} for _ in range(n)]
                ids.update(job.id for job in bound.enqueue_many(items))
            say(f"enqueued {len(ids)} jobs on queue {config.queue!r}")
            report = _drive(config, app, url, seed, rng, timeout, ids, runs, pool, say)
            say(f"done in {report.elapsed:.1f} s")
            return report
    finally:
        with shielded():
            session.clean_up(
                app,
                pool,
                say,
                queue=config.queue,
                purge=session.ALL_STATES if enqueued else None,
                workdir=workdir,
            )


def _drive(
    config: VerifyConfig,
    app: Durq,
    url: str,
    seed: int,
    rng: random.Random,
    timeout: float,
    ids: set[int],
    runs: RunsLog,
    pool: WorkerPool,
    say: Callable[[str], None],
) -> VerifyReport:
    """Launch the workers, kill them at the chosen moments, wait, and measure."""
    launched_at = time.time()
    started = time.monotonic()
    for _ in range(config.workers):
        pool.launch()
    thresholds = sorted(rng.uniform(*KILL_WINDOW) * config.jobs for _ in range(config.kills))
    kills: list[Kill] = []
    max_exits = 3 * config.workers
    next_db_check = 0.0
    timed_out = False
    while True:
        runs.poll()
        pool.replace_exited(max_exits, lambda _gone: pool.launch())
        if len(pool.exits) > max_exits:
            break
        if len(kills) < config.kills and len(runs.ended) >= thresholds[len(kills)]:
            victims = [p for p in pool.live if runs.running[p.pid]]  # busy ones, not idle
            if victims:
                victim = rng.choice(victims)
                kills.append(Kill(victim.pid, time.time()))
                pool.kill(victim)
                pool.launch()
                say(
                    f"kill {len(kills)}/{config.kills}: SIGKILL worker pid {victim.pid} "
                    f"after {len(runs.ended)} jobs"
                )
        now = time.monotonic()
        if now >= next_db_check:
            next_db_check = now + DB_CHECK_INTERVAL
            if _all_terminal(app, config.queue, ids):
                break
        if now - started > timeout:
            timed_out = True
            break
        time.sleep(LOOP_INTERVAL)
    elapsed = time.monotonic() - started
    pool.stop()
    runs.poll()
    states: dict[str, int] = defaultdict(int)
    lost_leases: dict[int, set[int]] = {}
    seen = 0
    for job in app.jobs(queue=config.queue, limit=len(ids) + 1000):
        if job.id not in ids:
            continue
        seen += 1
        states[str(job.state)] += 1
        lost_leases[job.id] = {e.attempt for e in job.errors if e.kind == "lease_lost"}
    analysis = analyse(runs.runs, kills, lost_leases, launched_at)
    return VerifyReport(
        url=shown_url(url),
        queue=config.queue,
        jobs=len(ids),
        kills_requested=config.kills,
        workers=config.workers,
        concurrency=config.concurrency,
        lease=config.lease,
        seed=seed,
        states=dict(states),
        analysis=analysis,
        elapsed=elapsed,
        timed_out=timed_out,
        worker_exits=list(pool.exits),
        missing=len(ids) - seen,
    )


def _all_terminal(app: Durq, queue: str, ids: set[int]) -> bool:
    """Whether every job in ``ids`` has reached a terminal state.

    Three cheap indexed reads (queued, scheduled, running; one row each) answer "no" most of
    the time. They are separate statements, so a job moving between them (the reaper putting
    a running job back in the queue, a claim taking a queued one) could slip through all
    three; a "yes" is therefore confirmed by one statement that reads the whole queue.
    """
    for state in PENDING_STATES:
        if app.store.list_jobs(state=state, queue=queue, task=None, limit=1):
            return False
    done = {
        r.id
        for r in app.store.list_jobs(state=None, queue=queue, task=None, limit=len(ids) + 1000)
        if r.state in session.TERMINAL_STATES
    }
    return ids <= done
