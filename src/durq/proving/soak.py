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

import itertools
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
from durq.proving.soak_producers import LedgerLog, ProducerProcess
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
#: With ``--producers``, the share of kills that hit a producer process (the rest hit
#: workers): a producer takes about a second to start again, so a larger share would
#: starve the workers of jobs.
PRODUCER_KILL_SHARE = 0.25
#: The tasks the soak enqueues (its queue also holds the hook jobs of expired jobs).
SOAK_TASKS = frozenset({soak_app.WORK_TASK, soak_app.TIMEOUT_TASK, soak_app.ATIMEOUT_TASK})


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
        self.producers: list[ProducerProcess] = []
        self.ledger_log = LedgerLog(self.workdir / "ledger.txt")
        self.producer_count = 0
        self.producer_kills = 0
        self.kill_times: dict[int, float] = {}  # pid -> epoch seconds of its signal
        self.found: set[int] = set()  # every finished id the soak read (ledger or not)
        self.seen_early: dict[int, Seen] = {}  # finished before the soak read its ledger line

    # -- workers --

    def launch(self, canary: bool = False) -> WorkerProcess:
        """Start a worker and its RSS series (``canary``: never signalled)."""
        p = self.pool.launch()
        self.series[p.pid] = WorkerSeries(p.id, p.pid, self.now(), canary)
        return p

    def now(self) -> float:
        """Seconds since the soak started."""
        return time.monotonic() - self.t0

    def launch_producer(self) -> None:
        """Start one producer process at its share of the rate."""
        cfg = self.config
        self.producer_count += 1
        self.producers.append(
            ProducerProcess(
                f"producer-{self.producer_count}",
                cfg,
                self.url,
                cfg.rate / cfg.producers,
                self.rng.getrandbits(32),
                self.ledger_log.path,
                self.workdir,
            )
        )

    def enqueued(self) -> int:
        """Jobs acknowledged so far (in the ledger)."""
        if self.producer is not None:
            return self.producer.enqueued
        with self.lock:
            return len(self.ledger)

    def read_ledger(self) -> int:
        """Take in the jobs the producer processes acknowledged since the last read;
        returns how many of them the soak had already seen finished."""
        entries = self.ledger_log.poll()
        early_seen = 0
        with self.lock:
            for job_id, expect in entries:
                self.ledger[job_id] = expect
                early = self.seen_early.pop(job_id, None)
                if early is not None:
                    self.seen[job_id] = early
                    early_seen += 1
                else:
                    self.pending.add(job_id)
        return early_seen

    def kill_one(self) -> None:
        """SIGKILL or SIGTERM a random worker other than the canary, or a producer
        process, and replace it."""
        victims = [p for p in self.pool.live if not self.series[p.pid].canary]
        sig = self.rng.choice((signal.SIGKILL, signal.SIGTERM))
        if self.producers and (not victims or self.rng.random() < PRODUCER_KILL_SHARE):
            target = self.rng.choice(self.producers)
            self.producers.remove(target)
            target.signal(sig)
            if sig == signal.SIGKILL:
                self.sigkills += 1
            else:
                self.sigterms += 1
            self.producer_kills += 1
            target.proc.wait()  # SIGTERM: it stops after its current transaction
            self.launch_producer()
            return
        if not victims:
            return
        victim = self.rng.choice(victims)
        self.signalled.add(victim.pid)
        self.kill_times[victim.pid] = time.time()
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
                if r.task in SOAK_TASKS:  # not the hook jobs of expired ones
                    self.found.add(r.id)
        n = 0
        with self.lock:
            for job_id in set(found) - set(self.seen) - self.pending:
                self.seen_early[job_id] = found[job_id]  # finished before its ledger line
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
        if cfg.producers:
            for _ in range(cfg.producers):
                self.launch_producer()
        else:
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
            finished += self.read_ledger()
            self.check_workers()
            if producing and now >= cfg.seconds:
                producing = False
                finished += self.stop_producers()
                drain_until = now + cfg.drain
                self.say(f"producer stopped after {self.enqueued()} jobs; draining")
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
                self.interval(last_report, self.enqueued() - enq_mark, finished - fin_mark)
                last_report, enq_mark, fin_mark = now, self.enqueued(), finished
                next_report = now + cfg.report_every
            if not producing:
                with self.lock:
                    done = not self.pending
                if done or now >= drain_until:
                    break
            time.sleep(LOOP_INTERVAL)
        self.sample()
        if self.now() > last_report:
            self.interval(last_report, self.enqueued() - enq_mark, finished - fin_mark)
        elapsed = self.now()
        self.pool.stop()
        self.runs.poll()
        return self.analyse(elapsed)

    def stop_producers(self) -> int:
        """Stop enqueueing (the thread, or every producer process) and read the ledger
        (returns :meth:`read_ledger`'s count)."""
        if self.producer is not None:
            self.producer.stop()
        for p in self.producers:
            p.stop()
        self.producers.clear()
        return self.read_ledger()

    def analyse(self, elapsed: float) -> SoakReport:
        """Settle the jobs still pending and count what ran against the ledger."""
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
        starts: dict[int, list[int]] = defaultdict(list)
        start_times: dict[int, list[tuple[float, int]]] = defaultdict(list)
        for r in self.runs.runs:
            if r.kind == "start":
                starts[r.job_id].append(r.pid)
                start_times[r.job_id].append((r.at, r.pid))
        wrong_all = sorted(
            (i, s.state, self.ledger[i].state)
            for i, s in self.seen.items()
            if s.state != self.ledger[i].state
        )
        # a job that failed although planned to succeed, and had an attempt in a worker
        # the soak signalled: the kills used up its attempts (a kill costs the attempt
        # it interrupts), which the contract allows; any other wrong state fails the soak
        by_kills = [
            w for w in wrong_all
            if w[1] == "failed" and (
                any(p in self.signalled for p in starts.get(w[0], ()))
                or self.seen[w[0]].lease_lost > 0  # killed after its claim, before its body began
            )
        ]  # fmt: skip
        wrong = [w for w in wrong_all if w not in by_kills]
        worst = 0.0  # the longest wait from a worker's signal to its job's next start
        for runs in start_times.values():
            runs.sort()
            for (_, pid), (nxt, _) in itertools.pairwise(runs):
                if pid in self.kill_times:
                    worst = max(worst, nxt - self.kill_times[pid])
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
            wrong_by_kills=by_kills,
            worst_recovery=worst,
            producer_kills=self.producer_kills,
            unacknowledged=len(self.found - set(self.ledger)),
            duplicate_runs=dups.runs,
            duplicate_jobs=dups.jobs,
            from_signalled=dups.from_signalled,
            after_lost_lease=dups.after_lost_lease,
            violations=dups.violations,
            sigkills=self.sigkills,
            sigterms=self.sigterms,
            worker_exits=self.pool.exits,
            producer_errors=self.producer.errors if self.producer is not None else [],
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
        for p in self.producers:
            p.stop()
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
