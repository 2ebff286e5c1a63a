"""``durq soak``: mixed work for a long time, workers killed and restarted, retention on.

A producer thread enqueues at a steady rate a mix of jobs (see
:mod:`durq.proving.soak_app`): fast, slow, flaky (transient failures, then success),
permanent failures, jobs that retry until their attempts run out, sync and async tasks that
overrun their timeout once, and jobs whose deadline passes before they may run. Each job's
expected terminal state and the runs it is planned to take go into a ledger when it is
enqueued (:mod:`durq.proving.soak_mix`).

Real ``durq worker durq.proving.soak_app:dq`` processes (:mod:`durq.proving.processes`) run
the jobs with a short retention (``--retain STATE=AGE`` for every finished state,
``--prune-interval``), so finished jobs are deleted while the soak runs. Worker 0 is never
signalled (its RSS spans the whole run); the others get SIGKILL or SIGTERM at random moments
and a replacement is started at once.

The soak watches (:mod:`durq.proving.soak_observe`):

- every job id in the ledger must be seen by the soak in its expected terminal state before
  retention deletes it (the soak reads the finished jobs every :data:`OBSERVE_INTERVAL`
  seconds; retention is far longer). A job that vanishes without having been seen finished
  is **lost**; one that ends in another state is **wrong**; one still pending when the
  drain time is up is **stuck**;
- runs: each run appends ``start``/``end`` to a runs file (:mod:`durq.proving.runs`). Runs
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
worker RSS and the load average, and ends with a PASS/FAIL line
(:mod:`durq.proving.soak_report`). Afterwards it deletes its queue's jobs and the
registrations of its workers, like ``durq verify``.
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from durq.app import Durq
from durq.errors import DurqError
from durq.proving import session, soak_app
from durq.proving.processes import (
    WorkerPool,
    WorkerProcess,
    WorkerSpec,
    interrupts_as_keyboard_interrupt,
    read_rss,
    shielded,
)
from durq.proving.report import shown_url
from durq.proving.runs import RunsLog
from durq.proving.session import QueueNotEmpty
from durq.proving.soak_mix import KINDS, Kind, Producer, SoakConfig
from durq.proving.soak_observe import (
    OBSERVE_INTERVAL,
    OBSERVE_LIMIT,
    SAMPLE_INTERVAL,
    Expect,
    Interval,
    Seen,
    WorkerSeries,
    count_duplicates,
    lease_lost,
    size_bounded,
)
from durq.proving.soak_report import SoakReport, interval_line, report_tables

__all__ = [
    "KINDS",
    "Expect",
    "Interval",
    "Kind",
    "QueueNotEmpty",
    "Seen",
    "SoakConfig",
    "SoakReport",
    "WorkerSeries",
    "interval_line",
    "report_tables",
    "run_soak",
    "size_bounded",
]

#: Seconds between iterations of the main loop (kills, exits, runs file).
LOOP_INTERVAL = 0.1


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
        self.series: dict[int, WorkerSeries] = {}
        self.signalled: set[int] = set()
        self.sigkills = 0
        self.sigterms = 0
        self.intervals: list[Interval] = []
        self.db_samples: list[tuple[float, int]] = []
        self.db_errors: list[tuple[float, str]] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="durq-soak-"))
        self.runs = RunsLog(self.workdir / "runs.txt")
        retain = [f"--retain={s}={config.retain:g}" for s in sorted(session.TERMINAL_STATES)]
        spec = WorkerSpec(
            soak_app.APP, url, config.queue, config.concurrency, config.lease, self.workdir,
            self.runs.path, (*retain, f"--prune-interval={config.prune_interval:g}"),
        )  # fmt: skip
        self.pool = WorkerPool(spec, f"durq-soak-{os.getpid()}-{secrets.token_hex(3)}")
        self.t0 = time.monotonic()
        self.producer: Producer | None = None

    # -- workers --

    def launch(self, canary: bool = False) -> WorkerProcess:
        """Start a worker and its RSS series (``canary``: never signalled)."""
        p = self.pool.launch()
        self.series[p.pid] = WorkerSeries(p.id, p.pid, self.now(), canary)
        return p

    def now(self) -> float:
        """Seconds since the soak started."""
        return time.monotonic() - self.t0

    def kill_one(self) -> None:
        """SIGKILL or SIGTERM a random worker other than the canary, and replace it."""
        victims = [p for p in self.pool.live if not self.series[p.pid].canary]
        if not victims:
            return
        victim = self.rng.choice(victims)
        sig = self.rng.choice((signal.SIGKILL, signal.SIGTERM))
        self.signalled.add(victim.pid)
        if sig == signal.SIGKILL:
            self.sigkills += 1
            self.series[victim.pid].end = "SIGKILL"
            self.pool.kill(victim)
        else:
            self.sigterms += 1
            self.series[victim.pid].end = "SIGTERM"
            self.pool.terminate(victim)
        self.launch()

    def check_workers(self) -> None:
        """Replace the workers that exited on their own (a failure; up to three per worker
        slot) and SIGKILL the SIGTERMed ones that take too long to stop."""

        def relaunch(p: WorkerProcess) -> None:
            self.launch(canary=self.series[p.pid].canary)

        for p in self.pool.replace_exited(3 * self.config.workers, relaunch):
            self.series[p.pid].end = f"exited {p.returncode}"
        self.pool.reap_stopping()

    # -- watching --

    def observe(self) -> int:
        """Record the jobs seen finished for the first time; returns how many."""
        with self.lock:
            if not self.pending:
                return 0
        found: dict[int, Seen] = {}
        at = self.now()
        for state in sorted(session.TERMINAL_STATES):
            rows = self.app.store.list_jobs(
                state=state, queue=self.config.queue, task=None, limit=OBSERVE_LIMIT
            )
            for r in rows:
                found[r.id] = Seen(r.state, r.attempts, lease_lost(r.errors), at)
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
        """Record the RSS of every worker that may still run, and the database's size."""
        t = self.now()
        for p in self.pool.running():
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
        """Close the progress interval that began ``since`` seconds into the soak, with the
        jobs enqueued and finished in it; prints its line."""
        with self.lock:
            pending = len(self.pending)
        rss = tuple(self.series[p.pid].rss[-1][1] for p in self.pool.live if self.series[p.pid].rss)
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
        """Start the workers and the producer, kill, watch and sample until the producer
        has run ``seconds`` and the jobs have drained, then stop and analyse."""
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
        self.pool.stop()
        self.runs.poll()
        return self.analyse(elapsed)

    def analyse(self, elapsed: float) -> SoakReport:
        """Settle the jobs still pending and count what ran against the ledger."""
        assert self.producer is not None
        late = self.observe()  # those that finished between the last read and the stop
        lost: list[int] = []
        stuck: list[int] = []
        for job_id in sorted(self.pending):
            record = self.app.store.get(job_id)
            if record is None:
                lost.append(job_id)
            elif record.state in session.TERMINAL_STATES:  # cannot happen after observe(); be safe
                self.seen[job_id] = Seen(
                    record.state, record.attempts, lease_lost(record.errors), self.now()
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
        dups = count_duplicates(starts, self.ledger, self.seen, self.signalled)
        by_kind: dict[str, dict[str, int]] = {}
        for k in KINDS:
            ids = [i for i, e in self.ledger.items() if e.kind == k.name]
            by_kind[k.name] = {
                "enqueued": len(ids),
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
            duplicate_runs=dups.runs,
            duplicate_jobs=dups.jobs,
            from_signalled=dups.from_signalled,
            after_lost_lease=dups.after_lost_lease,
            violations=dups.violations,
            sigkills=self.sigkills,
            sigterms=self.sigterms,
            worker_exits=self.pool.exits,
            producer_errors=self.producer.errors,
            intervals=self.intervals,
            workers=list(self.series.values()),
            db_samples=self.db_samples,
            db_errors=self.db_errors,
        )

    def cleanup(self, keep_workdir: bool) -> None:
        """Stop the producer and every process, delete the queue's jobs and the workers'
        registrations, and remove the temp dir (kept when ``keep_workdir``); see
        :func:`durq.proving.session.clean_up`."""
        producer = self.producer
        session.clean_up(
            self.app,
            self.pool,
            self.say,
            queue=self.config.queue,
            purge=(*session.ALL_STATES, "parked"),
            workdir=None if keep_workdir else self.workdir,
            first=[producer.stop] if producer is not None and producer.is_alive() else [],
        )


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
    say, url, seed = session.begin(config, progress)
    probe = Durq(url)
    try:
        session.require_empty(
            probe,
            config.queue,
            f"queue {config.queue!r} in {shown_url(url)} already has jobs; durq soak runs "
            "only on an empty queue of its own (choose another --queue, or another database)",
        )
    finally:
        probe.close()
    soak: _Soak | None = None
    report: SoakReport | None = None
    keep = False
    try:
        with interrupts_as_keyboard_interrupt():
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
            with shielded():
                soak.cleanup(keep_workdir=keep)
