"""``durq verify``: prove on the user's own database that killed workers lose no job.

It enqueues N jobs of :mod:`durq.verify_app`'s task on a queue of its own, runs them on real
``durq worker`` processes, SIGKILLs a worker K times at random moments (starting a
replacement each time), waits until every job is terminal, and reports:

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
:mod:`durq.verify_app`), so the figures come from what really ran, not from the database
alone. Afterwards it deletes every job of its queue (``Durq.purge``), the registrations of
the workers it started, its temporary directory and every process it started; on failure
and Ctrl-C too. Like ``durq enqueue``, it creates the database's schema if it is missing.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote, urlsplit

from rich.table import Table

from durq.app import Durq
from durq.checks import MAX_ATTEMPTS_LIMIT
from durq.errors import ConfigError, DurqError
from durq.store.sqlite.connection import parse_url as sqlite_parse_url
from durq.verify_app import PARENT_ENV, RUNS_ENV, register

#: Jobs per ``enqueue_many`` transaction.
ENQUEUE_CHUNK = 500
#: Seconds between reads of the runs file (and kill decisions) in the main loop.
LOOP_INTERVAL = 0.02
#: Seconds between database checks for "every job is terminal".
DB_CHECK_INTERVAL = 0.2
#: Grace (seconds) a worker gets at the end, via ``--grace``, to finish running jobs.
WORKER_GRACE = 1.0
#: Seconds to wait for a SIGTERMed worker to exit before SIGKILLing it.
STOP_TIMEOUT = 10.0
#: Kills happen when this share of the jobs has been run, at uniform random points in it.
KILL_WINDOW = (0.05, 0.8)
#: Sleep of one job in milliseconds, drawn uniformly from this range with the seed.
JOB_MS = (1.0, 10.0)
#: Non-terminal states (``scheduled`` is derived from ``queued``).
PENDING_STATES = ("queued", "scheduled", "running")
#: States a job never leaves by itself.
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "expired"})
#: How many offending job ids a report lists at most.
MAX_LISTED = 20


class QueueNotEmpty(DurqError):
    """The queue ``durq verify`` would use already holds jobs; nothing was changed."""


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


# -- what ran -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One line of the runs file: ``kind`` is ``start`` or ``end``; ``at`` is epoch seconds."""

    kind: str
    job_id: int
    attempt: int
    pid: int
    at: float


@dataclass(frozen=True, slots=True)
class Kill:
    """One SIGKILL: the process id and the epoch second just before the signal was sent."""

    pid: int
    at: float


class RunsLog:
    """Reads the runs file incrementally as workers append to it.

    Args:
        path: the runs file (created empty here, so workers only ever append to it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch(mode=0o600)
        self.runs: list[Run] = []
        self.ended: set[int] = set()
        self.running: dict[int, set[tuple[int, int]]] = defaultdict(set)  # pid -> (job, attempt)
        self.bad_lines = 0
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        """Parse the lines appended since the last call (a trailing partial line waits)."""
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            run = parse_run(line)
            if run is None:
                self.bad_lines += 1
                continue
            self.runs.append(run)
            if run.kind == "end":
                self.ended.add(run.job_id)
                self.running[run.pid].discard((run.job_id, run.attempt))
            else:
                self.running[run.pid].add((run.job_id, run.attempt))


def parse_run(line: bytes) -> Run | None:
    """One ``kind job attempt pid time`` line, or None when it is not one."""
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 5 or parts[0] not in ("start", "end"):
        return None
    try:
        return Run(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4]))
    except ValueError:
        return None


# -- analysis -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KillReport:
    """What one kill cost.

    Attributes:
        pid: the killed process.
        at: seconds after the workers were launched.
        in_flight: jobs it had started and not finished.
        recovery: seconds from the kill until each of those jobs had started again in
            another process (0.0 when none was in flight; None when one never did).
    """

    pid: int
    at: float
    in_flight: int
    recovery: float | None


@dataclass(frozen=True, slots=True)
class Analysis:
    """Figures from the runs file, the kills and the jobs' lost-lease history.

    Attributes:
        run: distinct jobs whose work ended at least once.
        duplicated: jobs started more than once.
        from_killed: duplicated jobs whose every superseded start was in a killed process.
        lease_expired: duplicated jobs with a superseded start in a live process whose
            lease the job's history records as lost (allowed by the contract, but the lease
            was too short for the load).
        violations: duplicated jobs with a superseded start that neither explains.
        kills: one :class:`KillReport` per kill, in order.
    """

    run: int
    duplicated: int
    from_killed: int
    lease_expired: int
    violations: list[int]
    kills: list[KillReport]

    @property
    def worst_recovery(self) -> float | None:
        """The longest recovery over the kills in seconds (None: a job was never restarted)."""
        values = [k.recovery for k in self.kills]
        if any(v is None for v in values):
            return None
        return max((v for v in values if v is not None), default=0.0)


def analyse(
    runs: Sequence[Run],
    kills: Sequence[Kill],
    lost_leases: dict[int, set[int]],
    launched_at: float,
) -> Analysis:
    """Work out duplicates and recovery times from what ran.

    Args:
        runs: every line of the runs file.
        kills: every SIGKILL sent.
        lost_leases: per job id, the attempts its history records as ``lease_lost``.
        launched_at: epoch seconds when the first worker was launched (kill times in the
            report are relative to it).

    Returns:
        The :class:`Analysis`.
    """
    killed = {k.pid for k in kills}
    starts: dict[int, list[Run]] = defaultdict(list)
    ended: set[tuple[int, int, int]] = set()
    for r in runs:
        if r.kind == "start":
            starts[r.job_id].append(r)
        else:
            ended.add((r.job_id, r.attempt, r.pid))
    duplicated = from_killed = lease_expired = 0
    violations: list[int] = []
    for job_id, job_starts in starts.items():
        if len(job_starts) < 2:
            continue
        duplicated += 1
        ordered = sorted(job_starts, key=lambda r: (r.at, r.attempt))
        superseded = ordered[:-1]  # the last start is the run whose outcome stood
        if all(r.pid in killed for r in superseded):
            from_killed += 1
        elif all(
            r.pid in killed or r.attempt in lost_leases.get(job_id, set()) for r in superseded
        ):
            lease_expired += 1
        else:
            violations.append(job_id)
    reports = []
    for kill in kills:
        unfinished = [
            r
            for job_starts in starts.values()
            for r in job_starts
            if r.pid == kill.pid and (r.job_id, r.attempt, r.pid) not in ended
        ]
        recovery: float | None = 0.0
        for r in unfinished:
            again = [s.at for s in starts[r.job_id] if s.pid != kill.pid and s.at >= r.at]
            if not again:
                recovery = None
                break
            assert recovery is not None
            recovery = max(recovery, min(again) - kill.at)
        reports.append(KillReport(kill.pid, kill.at - launched_at, len(unfinished), recovery))
    run = len({r.job_id for r in runs if r.kind == "end"})
    return Analysis(run, duplicated, from_killed, lease_expired, sorted(violations), reports)


# -- the report ---------------------------------------------------------------------------


@dataclass(slots=True)
class VerifyReport:
    """The outcome of one ``durq verify`` run (see :meth:`to_dict` for the figures)."""

    url: str
    queue: str
    jobs: int
    kills_requested: int
    workers: int
    concurrency: int
    lease: float
    seed: int
    states: dict[str, int]
    analysis: Analysis
    elapsed: float
    timed_out: bool
    worker_exits: list[str] = field(default_factory=list)
    missing: int = 0

    @property
    def succeeded(self) -> int:
        return self.states.get("succeeded", 0)

    @property
    def lost(self) -> int:
        """Jobs that did not end ``succeeded`` (any other state, or gone)."""
        return self.jobs - self.succeeded

    @property
    def throughput(self) -> float:
        """Jobs succeeded per second of wall time since the workers were launched."""
        return self.succeeded / self.elapsed if self.elapsed > 0 else 0.0

    def reasons(self) -> list[str]:
        """Why the run failed; empty when it passed."""
        out = []
        a = self.analysis
        if self.lost:
            shown = ", ".join(
                f"{n} {s}" for s, n in sorted(self.states.items()) if s != "succeeded"
            )
            gone = f", {self.missing} missing" if self.missing else ""
            out.append(f"{self.lost} job(s) lost ({shown}{gone})")
        if a.violations:
            ids = ", ".join(map(str, a.violations[:MAX_LISTED]))
            out.append(
                f"{len(a.violations)} job(s) ran again although no kill or lost lease explains "
                f"it (contract violation): {ids}"
            )
        if a.worst_recovery is None:
            out.append("a killed worker's job was never started again")
        if len(a.kills) < self.kills_requested:
            out.append(f"only {len(a.kills)} of {self.kills_requested} kills happened")
        if self.timed_out:
            out.append(f"timed out after {self.elapsed:.1f} s with jobs still pending")
        out.extend(f"a worker exited on its own: {e}" for e in self.worker_exits)
        return out

    @property
    def passed(self) -> bool:
        return not self.reasons()

    def summary(self) -> str:
        """The final ``PASS: ...`` or ``FAIL: ...`` line."""
        a = self.analysis
        worst = "-" if a.worst_recovery is None else f"{a.worst_recovery:.2f} s"
        figures = (
            f"lost {self.lost}, duplicated {a.duplicated}, kills {len(a.kills)}, "
            f"worst recovery {worst}, {self.throughput:.0f} jobs/s"
        )
        if self.passed:
            return f"PASS: {figures}"
        return f"FAIL: {'; '.join(self.reasons())} ({figures})"

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (times in seconds)."""
        a = self.analysis
        return {
            "passed": self.passed,
            "summary": self.summary(),
            "reasons": self.reasons(),
            "url": self.url,
            "queue": self.queue,
            "jobs": self.jobs,
            "run": a.run,
            "succeeded": self.succeeded,
            "lost": self.lost,
            "states": dict(sorted(self.states.items())),
            "missing": self.missing,
            "duplicated": a.duplicated,
            "duplicated_from_killed": a.from_killed,
            "duplicated_after_lease_expiry": a.lease_expired,
            "contract_violations": a.violations,
            "kills_requested": self.kills_requested,
            "kills": [
                {
                    "pid": k.pid,
                    "at": round(k.at, 3),
                    "in_flight": k.in_flight,
                    "recovery": None if k.recovery is None else round(k.recovery, 3),
                }
                for k in a.kills
            ],
            "worst_recovery": None if a.worst_recovery is None else round(a.worst_recovery, 3),
            "elapsed": round(self.elapsed, 3),
            "throughput": round(self.throughput, 1),
            "timed_out": self.timed_out,
            "worker_exits": self.worker_exits,
            "workers": self.workers,
            "concurrency": self.concurrency,
            "lease": self.lease,
            "seed": self.seed,
        }


def report_table(report: VerifyReport) -> Table:
    """The report as a ``rich`` table (figures in rows)."""
    a = report.analysis
    worst = "never recovered" if a.worst_recovery is None else f"{a.worst_recovery:.2f} s"
    table = Table(title="durq verify", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("database", report.url),
        ("queue", report.queue),
        ("jobs", str(report.jobs)),
        ("run", str(a.run)),
        ("succeeded", str(report.succeeded)),
        ("lost", str(report.lost)),
        ("duplicated", str(a.duplicated)),
        ("  from killed workers", str(a.from_killed)),
        ("  after a lost lease", str(a.lease_expired)),
        ("  unexplained", str(len(a.violations))),
        ("kills", f"{len(a.kills)}/{report.kills_requested}"),
        ("jobs in flight at kills", str(sum(k.in_flight for k in a.kills))),
        ("worst recovery", worst),
        ("elapsed", f"{report.elapsed:.2f} s"),
        ("throughput (incl. start-up, recovery)", f"{report.throughput:.0f} jobs/s"),
        ("workers x concurrency", f"{report.workers} x {report.concurrency}"),
        ("lease", f"{report.lease:g} s"),
        ("seed", str(report.seed)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


# -- database helpers ---------------------------------------------------------------------


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def absolute_url(url: str) -> str:
    """The URL with a SQLite path made absolute (workers run in another directory).

    Raises:
        ConfigError: a malformed SQLite URL.
    """
    if is_postgres(url):
        return url
    opts = sqlite_parse_url(url)
    query = urlsplit(url).query if url.startswith("sqlite:") else ""
    path = quote(os.path.abspath(opts.path), safe="/")
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """The URL for messages: a PostgreSQL password is replaced by ``***``."""
    if is_postgres(url):
        from durq.store.postgres.connection import mask

        return mask(url)
    return url


#: Every stored state: verify empties its own queue whatever is left in it.
ALL_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "expired")


# -- worker processes ---------------------------------------------------------------------


class WorkerProcess:
    """One ``durq worker durq.verify_app:dq`` child in a session of its own (so a Ctrl-C
    reaches ``durq verify`` only, which then stops it), stderr to a log file.

    Args:
        worker_id: the ``--worker-id`` it registers under.
        url: the database URL (absolute).
        config: the run's settings (queue, concurrency, lease).
        workdir: the temporary directory: working directory and log location.
        env: the environment (runs file and parent pid included).
        app_spec: the ``MODULE:ATTR`` the worker runs (``durq soak`` runs its own app).
        extra_args: more ``durq worker`` options, appended (e.g. retention for the soak).
    """

    def __init__(
        self,
        worker_id: str,
        url: str,
        config: VerifyConfig,
        workdir: Path,
        env: dict[str, str],
        *,
        app_spec: str = "durq.verify_app:dq",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.id = worker_id
        self.log = workdir / f"{worker_id}.log"
        self.killed = False
        command = [
            sys.executable, "-m", "durq", "worker", app_spec,
            "--db", url, "--queues", config.queue,
            "--concurrency", str(config.concurrency), "--lease", str(config.lease),
            "--grace", str(WORKER_GRACE), "--worker-id", worker_id, "--log-level", "warning",
            *extra_args,
        ]  # fmt: skip
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL and reap."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def tail(self, lines: int = 3) -> str:
        """The last lines of its stderr, for messages."""
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


def stop_all(procs: Sequence[WorkerProcess], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every live process, wait up to ``timeout`` seconds, then SIGKILL the rest."""
    for p in procs:
        if p.alive():
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()


@contextlib.contextmanager
def _interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """In the main thread, turn SIGTERM into KeyboardInterrupt (so cleanup runs) for the
    duration; elsewhere do nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM while cleaning up (main thread only), so that a second
    Ctrl-C cannot leave processes or rows behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# -- the run ------------------------------------------------------------------------------


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
    config.check()
    say = progress or (lambda _line: None)
    url = absolute_url(config.url)
    seed = config.seed if config.seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    timeout = config.timeout if config.timeout is not None else default_timeout(config)
    app = Durq(url)
    task = register(app)
    procs: list[WorkerProcess] = []
    enqueued = False
    workdir: Path | None = None
    prefix = f"durq-verify-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        with _interrupts_as_keyboard_interrupt():
            if app.store.list_jobs(state=None, queue=config.queue, task=None, limit=1):
                raise QueueNotEmpty(
                    f"queue {config.queue!r} in {shown_url(url)} already has jobs; durq verify "
                    "runs only on an empty queue of its own (choose another --queue; a verify "
                    "that was itself killed with SIGKILL leaves its jobs behind)"
                )
            workdir = Path(tempfile.mkdtemp(prefix="durq-verify-"))
            runs = RunsLog(workdir / "runs.txt")
            max_attempts = min(MAX_ATTEMPTS_LIMIT, config.kills + 10)
            bound = task.options(queue=config.queue, max_attempts=max_attempts)
            ids: set[int] = set()
            enqueued = True
            for start in range(0, config.jobs, ENQUEUE_CHUNK):
                n = min(ENQUEUE_CHUNK, config.jobs - start)
                items = [{"ms": round(rng.uniform(*JOB_MS), 3)} for _ in range(n)]
                ids.update(job.id for job in bound.enqueue_many(items))
            say(f"enqueued {len(ids)} jobs on queue {config.queue!r}")
            report = _drive(config, app, url, seed, rng, timeout, ids, runs, procs, prefix, say)
            say(f"done in {report.elapsed:.1f} s")
            return report
    finally:
        with _shielded():
            _cleanup(app, config.queue, procs, enqueued, workdir, say)


def _drive(
    config: VerifyConfig,
    app: Durq,
    url: str,
    seed: int,
    rng: random.Random,
    timeout: float,
    ids: set[int],
    runs: RunsLog,
    procs: list[WorkerProcess],
    prefix: str,
    say: Callable[[str], None],
) -> VerifyReport:
    """Launch the workers, kill them at the chosen moments, wait, and measure."""
    env = {
        **os.environ,
        "DURQ_URL": url,
        RUNS_ENV: str(runs.path),
        PARENT_ENV: str(os.getpid()),
    }
    assert runs.path.parent.is_dir()
    workdir = runs.path.parent
    counter = iter(range(1_000_000))

    def launch() -> WorkerProcess:
        p = WorkerProcess(f"{prefix}-{next(counter)}", url, config, workdir, env)
        procs.append(p)
        return p

    launched_at = time.time()
    started = time.monotonic()
    live = [launch() for _ in range(config.workers)]
    thresholds = sorted(rng.uniform(*KILL_WINDOW) * config.jobs for _ in range(config.kills))
    kills: list[Kill] = []
    exits: list[str] = []
    max_exits = 3 * config.workers
    next_db_check = 0.0
    timed_out = False
    while True:
        runs.poll()
        for p in list(live):
            if not p.alive():  # exited although nobody killed it
                live.remove(p)
                exits.append(f"pid {p.pid} exit code {p.proc.returncode}: {p.tail()}")
                if len(exits) <= max_exits:
                    live.append(launch())
        if len(exits) > max_exits:
            break
        if len(kills) < config.kills and len(runs.ended) >= thresholds[len(kills)]:
            victims = [p for p in live if runs.running[p.pid]]  # kill work, not idle waiting
            if victims:
                victim = rng.choice(victims)
                kills.append(Kill(victim.pid, time.time()))
                victim.kill()
                live.remove(victim)
                live.append(launch())
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
    stop_all(live)
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
        worker_exits=exits,
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
        if r.state in TERMINAL_STATES
    }
    return ids <= done


def _cleanup(
    app: Durq,
    queue: str,
    procs: Sequence[WorkerProcess],
    enqueued: bool,
    workdir: Path | None,
    say: Callable[[str], None],
) -> None:
    """Stop every process, delete the queue's jobs and the workers' registrations, and remove
    the temp dir. Each step runs even when an earlier one failed; the first failure is
    re-raised at the end."""
    errors: list[BaseException] = []

    def step(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - report every cleanup failure, go on
            errors.append(exc)
            say(f"cleanup: {type(exc).__name__}: {exc}")

    step(lambda: stop_all(procs))
    if enqueued:
        step(lambda: app.purge(queue, states=ALL_STATES))

    def unregister() -> None:  # killed workers could not unregister themselves
        for p in procs:
            app.store.unregister_worker(p.id)

    step(unregister)
    step(app.close)
    if workdir is not None:
        step(lambda: shutil.rmtree(workdir, ignore_errors=True))
    if errors:
        raise errors[0]
