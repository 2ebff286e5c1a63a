"""The report of ``durq verify``: what the runs file and the kills say (:func:`analyse`), and
the figures, verdict and table (:class:`VerifyReport`, :func:`report_table`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from durq.proving.report import Verdict, figure_table, jobs_line
from durq.proving.runs import Run

#: How many offending job ids a report lists at most.
MAX_LISTED = 20


@dataclass(frozen=True, slots=True)
class Kill:
    """One SIGKILL: the process id and the epoch second just before the signal was sent."""

    pid: int
    at: float


@dataclass(frozen=True, slots=True)
class KillReport:
    """What one kill cost.

    Attributes:
        pid: the killed process.
        at: seconds after the workers were launched.
        in_flight: jobs it had started and not finished.
        recovery: seconds from the kill until each of those jobs had started again in
            another process (0.0 when none was in flight; None when one never did).
        uncommitted: jobs whose task had finished in it, but whose outcome it had not
            committed yet when it was killed (so they ran again elsewhere: duplicates
            that the contract allows, and that ``in_flight`` does not count).
    """

    pid: int
    at: float
    in_flight: int
    recovery: float | None
    uncommitted: int = 0


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
        uncommitted = sum(
            1
            for job_starts in starts.values()
            for r in job_starts
            if r.pid == kill.pid
            and (r.job_id, r.attempt, r.pid) in ended
            and any(s.pid != kill.pid and s.at >= r.at for s in job_starts)
        )
        reports.append(
            KillReport(kill.pid, kill.at - launched_at, len(unfinished), recovery, uncommitted)
        )
    run = len({r.job_id for r in runs if r.kind == "end"})
    return Analysis(run, duplicated, from_killed, lease_expired, sorted(violations), reports)


# -- the report ---------------------------------------------------------------------------


@dataclass(slots=True)
class VerifyReport(Verdict):
    """The outcome of one ``durq verify`` run (see :meth:`to_dict` for the figures; times in
    seconds)."""

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
            what = "ran again although no kill or lost lease explains it (contract violation)"
            out.append(jobs_line(a.violations, what, MAX_LISTED))
        if a.worst_recovery is None:
            out.append("a killed worker's job was never started again")
        if len(a.kills) < self.kills_requested:
            out.append(f"only {len(a.kills)} of {self.kills_requested} kills happened")
        if self.timed_out:
            out.append(f"timed out after {self.elapsed:.1f} s with jobs still pending")
        out.extend(f"a worker exited on its own: {e}" for e in self.worker_exits)
        return out

    def figures(self) -> str:
        """Lost, duplicated, kills, worst recovery and throughput, for the last line."""
        a = self.analysis
        worst = "-" if a.worst_recovery is None else f"{a.worst_recovery:.2f} s"
        return (
            f"lost {self.lost}, duplicated {a.duplicated}, kills {len(a.kills)}, "
            f"worst recovery {worst}, {self.throughput:.0f} jobs/s"
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (times in seconds)."""
        a = self.analysis
        return {
            **self.verdict(),
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
                    "uncommitted": k.uncommitted,
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
    rows = [
        ("database", report.url),
        ("queue", report.queue),
        ("jobs", str(report.jobs)),
        ("run", str(a.run)),
        ("succeeded", str(report.succeeded)),
        ("lost", str(report.lost)),
        ("duplicated (jobs started more than once)", str(a.duplicated)),
        ("  from killed workers", str(a.from_killed)),
        ("  after a lost lease", str(a.lease_expired)),
        ("  unexplained", str(len(a.violations))),
        ("kills", f"{len(a.kills)}/{report.kills_requested}"),
        ("jobs in flight at kills (still running)", str(sum(k.in_flight for k in a.kills))),
        (
            "  + finished, outcome not yet committed",
            str(sum(k.uncommitted for k in a.kills)),
        ),
        ("worst recovery", worst),
        ("elapsed", f"{report.elapsed:.2f} s"),
        ("throughput (incl. start-up, recovery)", f"{report.throughput:.0f} jobs/s"),
        ("workers x concurrency", f"{report.workers} x {report.concurrency}"),
        ("lease", f"{report.lease:g} s"),
        ("seed", str(report.seed)),
    ]
    return figure_table("durq verify", rows)
