"""Issue 14's targets as ratios, computed from the figures of the same run.

The SQLite and PostgreSQL tables give each figure beside its peers; the targets of issue 14
are ratios between rows of those tables (durq's 1-thread drain ÷ SqliteHuey's, durq's
``-c 10`` drain ÷ the 100-per-transaction floor, …). :func:`derive` computes them into
``results["targets"]`` after every case has run, and :func:`section` prints them with their
verdicts, so that ``make bench`` says which targets the run met.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.report import Results, Row, Section, value

#: The PostgreSQL 4 x c16 target is "2x today"; issue 14 gave no 4 x c16 figure, so today is
#: its best PostgreSQL drain (one process, ``-c 64``: 6,767 jobs/s).
PG_TODAY = 6_767.0


@dataclass(frozen=True)
class Target:
    """One derived ratio: ``name`` = ``num`` ÷ ``den`` (``(case, field)`` references, or a
    constant for ``den``), compared with ``bound`` by ``op``."""

    name: str
    metric: str
    num: tuple[str, str]
    den: tuple[str, str] | float
    op: str
    bound: float


TARGETS = (
    Target("c1_vs_huey", "SQLite FULL drain, 1 thread ÷ SqliteHuey", ("drain_full_c1", "rate"),
           ("huey", "drain_rate"), ">=", 3.0),
    Target("c1_vs_floor1", "SQLite FULL drain, 1 thread ÷ floor 1 job/tx",
           ("drain_full_c1", "rate"), ("floor_full", "drain_1_rate"), ">=", 2.0),
    Target("c10_vs_floor100", "SQLite FULL drain, -c 10 ÷ floor 100 jobs/tx",
           ("drain_full_c10", "rate"), ("floor_full", "drain_100_rate"), ">=", 0.8),
    Target("pickup_tail", "SQLite FULL pickup, p99 ÷ median", ("pickup", "p99_ms"),
           ("pickup", "median_ms"), "<=", 2.0),
    Target("enqueue_full", "enqueue one ÷ raw one-row commit, FULL (paired)",
           ("enqueue_one_full", "paired_ratio"), 1.0, ">=", 0.9),
    Target("enqueue_normal", "enqueue one ÷ raw one-row commit, NORMAL (paired)",
           ("enqueue_one_normal", "paired_ratio"), 1.0, ">=", 0.9),
    Target("many_vs_floor100", "enqueue_many ÷ floor 100 rows/tx, FULL",
           ("enqueue_many", "rate"), ("floor_full", "enqueue_100_rate"), ">=", 1.5),
    Target("info_cost", "drain at info ÷ at warning (c4)", ("drain_logs", "info_rate"),
           ("drain_logs", "warning_rate"), ">=", 0.9),
    Target("pg_c1_vs_pgq", "PostgreSQL drain, 1 thread ÷ pgqueuer (its default)",
           ("pg_drain_1x1", "rate"), ("pgqueuer", "drain_rate"), ">=", 1.0),
    Target("pg_c10_vs_pgq", "PostgreSQL drain, -c 10 ÷ pgqueuer", ("pg_drain_1x10", "rate"),
           ("pgqueuer", "drain_rate"), ">=", 3.0),
    Target("pg_4x16_vs_today", f"PostgreSQL drain, 4 processes x c16 ÷ {PG_TODAY:,.0f}/s",
           ("pg_drain_4x16", "rate"), PG_TODAY, ">=", 2.0),
    Target("pg_bulk_vs_pgq", "PostgreSQL enqueue_many ÷ pgqueuer's batch enqueue",
           ("pg_enqueue_many", "rate"), ("pgqueuer", "batch_enqueue_rate"), ">=", 3.0),
)  # fmt: skip


def derive(results: Results) -> None:
    """Add ``results["targets"]``: every ratio of :data:`TARGETS` whose figures exist."""
    out: dict[str, float] = {}
    for t in TARGETS:
        num = value(results, t.num)
        den = t.den if isinstance(t.den, float) else value(results, t.den)
        if num is not None and den:
            out[t.name] = num / den
    if out:
        results["targets"] = out


def section() -> Section:
    """The table of issue 14's targets (after :func:`derive`)."""
    rows = [Row(t.metric, "x", ("targets", t.name), t.op, t.bound) for t in TARGETS]
    return Section(
        "targets",
        "issue 14's targets (ratios of figures from this run)",
        (),
        rows,
        "Each ratio is computed from the rows above; '—' when a case did not run.",
        ratio_title="",
    )
