"""The report of ``durq soak``: the figures and the verdict (:class:`SoakReport`), the
progress line of each interval (:func:`interval_line`) and the tables
(:func:`report_tables`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from durq.proving.report import Verdict, column_table, figure_table, jobs_line
from durq.proving.soak_mix import SoakConfig
from durq.proving.soak_observe import RSS_GROWTH_LIMIT, Interval, WorkerSeries, size_bounded

#: How many job ids a reason lists at most.
MAX_LISTED = 10


@dataclass(slots=True)
class SoakReport(Verdict):
    """The outcome of one soak (see :meth:`to_dict` for the figures; times in seconds,
    sizes in bytes)."""

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
    wrong_by_kills: list[tuple[int, str, str]] = field(default_factory=list)
    worst_recovery: float = 0.0
    producer_kills: int = 0
    unacknowledged: int = 0

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
                    f"({mib(w.rss[0][1])} -> {mib(w.rss[-1][1])})"
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
            what = "lost (gone before they were seen finished)"
            out.append(jobs_line(self.lost, what, MAX_LISTED))
        if self.wrong:
            shown = ", ".join(f"{i} {got} (expected {exp})" for i, got, exp in self.wrong[:5])
            out.append(f"{len(self.wrong)} job(s) ended in the wrong state: {shown}")
        if self.stuck:
            what = f"still pending {self.config.drain:g} s after the producer stopped"
            out.append(jobs_line(self.stuck, what, MAX_LISTED))
        if self.violations:
            what = (
                "ran more often than planned in workers nobody signalled, without a lost "
                "lease (contract violation)"
            )
            out.append(jobs_line(self.violations, what, MAX_LISTED))
        out.extend(f"a worker exited on its own: {e}" for e in self.worker_exits)
        out.extend(self.rss_flags())
        bounded, first, second = self.db_bounded()
        if bounded is False:
            out.append(
                f"database size kept growing with retention on: {mib(first)} (largest in the "
                f"first half after warm-up) -> {mib(second)} (second half)"
            )
        return out

    @property
    def finished(self) -> int:
        return sum(i.finished for i in self.intervals)

    def figures(self) -> str:
        """Jobs, lost, wrong, stuck, duplicate runs, kills, database size and throughput,
        for the last line."""
        bounded, _, _ = self.db_bounded()
        size = "not judged" if bounded is None else ("bounded" if bounded else "GROWING")
        return (
            f"{self.enqueued} jobs, lost {len(self.lost)}, wrong {len(self.wrong)}, "
            f"stuck {len(self.stuck)}, duplicate runs {self.duplicate_runs} "
            f"({len(self.violations)} unexplained), kills {self.sigkills} SIGKILL + "
            f"{self.sigterms} SIGTERM, db {size}, "
            f"{self.finished / self.elapsed if self.elapsed else 0:.0f} jobs/s"
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (times in seconds, sizes in bytes)."""
        bounded, first, second = self.db_bounded()
        sizes = [b for _, b in self.db_samples]
        return {
            **self.verdict(),
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
            "wrong_by_kills": len(self.wrong_by_kills),
            "worst_recovery": round(self.worst_recovery, 3),
            "producer_kills": self.producer_kills,
            "unacknowledged": self.unacknowledged,
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


def mib(n: int | None) -> str:
    """``n`` bytes in MiB with one decimal, for reports (``-`` for None)."""
    return "-" if n is None else f"{n / 1048576:.1f} MiB"


def interval_line(i: Interval) -> str:
    """One progress line."""
    rss = "/".join(f"{b / 1048576:.0f}" for b in i.rss) or "-"
    return (
        f"t={i.t:6.0f}s  enq {i.enqueued:5d}  fin {i.finished:5d} ({i.throughput:5.1f}/s)  "
        f"pending {i.pending:5d}  kills {i.kills:3d}  db {mib(i.db_bytes):>9}  "
        f"rss MiB {rss}  load {i.load:.2f}"
    )


def report_tables(report: SoakReport) -> list[Table]:
    """The report as ``rich`` tables: summary, throughput over time, workers."""
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
        ("  failed: every attempt used up by kills", str(len(report.wrong_by_kills))),
        ("stuck", str(len(report.stuck))),
        ("duplicate runs", str(report.duplicate_runs)),
        ("  jobs with extra runs", str(report.duplicate_jobs)),
        ("  explained by a signalled worker", str(report.from_signalled)),
        ("  explained by a lost lease", str(report.after_lost_lease)),
        ("  unexplained", str(len(report.violations))),
        ("kills", f"{report.sigkills} SIGKILL, {report.sigterms} SIGTERM"),
        ("  of producer processes", str(report.producer_kills)),
        ("  jobs enqueued but not acknowledged", str(report.unacknowledged)),
        ("worst recovery (signal -> next start)", f"{report.worst_recovery:.1f} s"),
        ("producer errors", str(len(report.producer_errors))),
        ("database errors (soak's own reads)", str(len(report.db_errors))),
        (
            "database size first/max/last",
            " / ".join(mib(x) for x in (sizes[0], max(sizes), sizes[-1])) if sizes else "-",
        ),
        (
            "database bounded",
            "not judged (run too short)"
            if bounded is None
            else f"{'yes' if bounded else 'NO'} ({mib(first)} -> {mib(second)})",
        ),
        ("workers x concurrency", f"{report.config.workers} x {report.config.concurrency}"),
        (
            "lease / retain / prune",
            f"{report.config.lease:g} s / {report.config.retain:g} s / "
            f"{report.config.prune_interval:g} s",
        ),
        ("seed", str(report.seed)),
    ]
    summary = figure_table("durq soak", rows)

    over_time = column_table(
        "throughput over time",
        ("t (s)", "enqueued", "finished", "jobs/s", "pending", "kills", "db", "rss MiB", "load"),
    )
    for i in report.intervals:
        over_time.add_row(
            f"{i.t:.0f}", str(i.enqueued), str(i.finished), f"{i.throughput:.1f}",
            str(i.pending), str(i.kills), mib(i.db_bytes),
            "/".join(f"{b / 1048576:.0f}" for b in i.rss), f"{i.load:.2f}",
        )  # fmt: skip

    workers = column_table(
        "worker RSS (first -> last)",
        ("worker", "pid", "lived (s)", "ended", "first", "max", "last", "growth after warm-up"),
    )
    for w in report.workers:
        if not w.rss:
            continue
        g = w.growth(report.warmup)
        workers.add_row(
            w.id.rsplit("-", 1)[-1] + (" (never killed)" if w.canary else ""),
            str(w.pid), f"{w.rss[-1][0] - w.started:.0f}", w.end,
            mib(w.rss[0][1]), mib(max(b for _, b in w.rss)), mib(w.rss[-1][1]),
            "-" if g is None else f"{g:+.0%}",
        )  # fmt: skip
    return [summary, over_time, workers]
