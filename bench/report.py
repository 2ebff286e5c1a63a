"""Turning figures into the printed table (rich) and the JSON document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

Results = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Row:
    """One line of the table.

    ``durq``, ``huey`` and ``pq`` are ``(case, field)`` references into the results;
    ``op``/``bound`` is the target (``>=``, ``<=``, ``<``; ``within`` compares with the
    ``ref`` row's durq figure).
    """

    metric: str
    unit: str
    durq: tuple[str, str]
    op: str = ""
    bound: float = 0.0
    ref: tuple[str, str] | None = None
    huey: tuple[str, str] | None = None
    pq: tuple[str, str] | None = None
    lower_is_better: bool = False


def rows(concurrencies: tuple[int, ...], peer_sync: str, sizes: dict[str, Any]) -> list[Row]:
    """The table's rows. Peers run at their default durability (``peer_sync``), so their
    figures sit in the rows of the same ``synchronous`` level."""

    def peer(sync: str, case: str, field: str) -> tuple[str, str] | None:
        return (case, field) if sync == peer_sync else None

    n_one, n_many, n_drain = sizes["enqueue_one"], sizes["enqueue_many"], sizes["drain"]
    hist, hc = sizes["history_drain"], sizes["history_concurrency"]
    out = [
        Row(
            f"enqueue one at a time ({n_one:,}), FULL",
            "jobs/s",
            ("enqueue_one_full", "rate"),
            ">=",
            5_000,
            huey=peer("FULL", "huey", "enqueue_rate"),
            pq=peer("FULL", "pq", "put_rate"),
        ),
        Row(
            f"enqueue one at a time ({n_one:,}), NORMAL",
            "jobs/s",
            ("enqueue_one_normal", "rate"),
            ">=",
            25_000,
            huey=peer("NORMAL", "huey", "enqueue_rate"),
            pq=peer("NORMAL", "pq", "put_rate"),
        ),
        Row(
            f"enqueue_many ({n_many:,} in chunks of {sizes['chunk']:,}), FULL",
            "jobs/s",
            ("enqueue_many", "rate"),
            ">=",
            100_000,
        ),
    ]
    for sync, bound in (("FULL", 10_000), ("NORMAL", 15_000)):
        for c in concurrencies:
            out.append(
                Row(
                    f"drain {n_drain:,} no-ops, {sync}, concurrency {c}",
                    "jobs/s",
                    (f"drain_{sync.lower()}_c{c}", "rate"),
                    ">=",
                    bound,
                    huey=peer(sync, "huey", "drain_rate"),
                    pq=peer(sync, "pq", "drain_rate"),
                )
            )
    out += [
        Row(
            "idle pickup latency, median",
            "ms",
            ("pickup", "median_ms"),
            "<=",
            2.0,
            huey=("huey_pickup", "median_ms"),
            lower_is_better=True,
        ),
        Row(
            "idle pickup latency, p99",
            "ms",
            ("pickup", "p99_ms"),
            "<=",
            10.0,
            huey=("huey_pickup", "p99_ms"),
            lower_is_better=True,
        ),
        Row(
            f"worker RSS after {sizes['memory_jobs']:,} jobs",
            "MB",
            ("memory", "rss_mb"),
            "<",
            100.0,
            lower_is_better=True,
        ),
        Row(
            f"drain {hist:,}, FULL, c{hc}, on {sizes['history_small']:,} finished rows",
            "jobs/s",
            ("history", "small_rate"),
        ),
        Row(
            f"drain {hist:,}, FULL, c{hc}, on {sizes['history_large']:,} finished rows",
            "jobs/s",
            ("history", "large_rate"),
            "within",
            0.10,
            ref=("history", "small_rate"),
        ),
    ]
    return out


def value(results: Results, ref: tuple[str, str] | None) -> float | None:
    if ref is None:
        return None
    case = results.get(ref[0])
    if not case or "error" in case:
        return None
    got = case.get(ref[1])
    return float(got) if isinstance(got, int | float) else None


def verdict(row: Row, results: Results) -> tuple[str, bool | None]:
    """The target as text, and whether the durq figure meets it (None: no target/figure)."""
    got = value(results, row.durq)
    if not row.op:
        return "", None
    if row.op == "within":
        ref = value(results, row.ref)
        text = f"≥ {1 - row.bound:.0%} of row above"
        if got is None or ref is None:
            return text, None
        return text, got >= (1 - row.bound) * ref
    text = f"{row.op.replace('>=', '≥').replace('<=', '≤')} {fmt(row.bound, row.unit)}"
    if got is None:
        return text, None
    ok = {">=": got >= row.bound, "<=": got <= row.bound, "<": got < row.bound}[row.op]
    return text, ok


def fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "jobs/s":
        return f"{x:,.0f}"
    if unit == "ms":
        return f"{x:.2f}"
    return f"{x:.1f}"


def ratio(durq_value: float | None, peer_value: float | None) -> str:
    if durq_value is None or peer_value is None or peer_value == 0:
        return "—"
    return f"{durq_value / peer_value:.2f}x"


def table_rows(results: Results, table: list[Row]) -> list[dict[str, Any]]:
    """The table as plain data (for ``--json``)."""
    out = []
    for row in table:
        target, ok = verdict(row, results)
        out.append(
            {
                "metric": row.metric,
                "unit": row.unit,
                "durq": value(results, row.durq),
                "target": target,
                "pass": ok,
                "huey": value(results, row.huey),
                "persist_queue": value(results, row.pq),
                "error": (results.get(row.durq[0]) or {}).get("error"),
            }
        )
    return out


def render(console: Console, machine: dict[str, Any], results: Results, table: list[Row]) -> None:
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    header.add_row(
        "machine", f"{machine['cores']} cores · {machine['cpu']} · {machine['platform']}"
    )
    header.add_row("python", f"{machine['implementation']} {machine['python']}")
    header.add_row("sqlite", machine["sqlite"])
    header.add_row("bench dir", f"{machine['bench_dir']} on {machine['filesystem']}")
    header.add_row(
        "versions",
        f"durq {machine['durq']} · huey {machine['huey']} · persist-queue {machine['persist-queue']}",
    )
    sync = machine["sqlite_default_synchronous"]
    header.add_row("durq durability", "WAL, synchronous=FULL unless the row says NORMAL")
    header.add_row(
        "SqliteHuey durability",
        f"defaults: WAL, synchronous not set by huey → SQLite default ({sync}); "
        "1 consumer, 1 thread worker, default polling (0.1 s, x1.15 backoff, ≤ 10 s)",
    )
    header.add_row(
        "persist-queue durability",
        f"SQLiteAckQueue defaults: WAL, auto_commit=True, synchronous not set → SQLite default ({sync})",
    )
    console.print(header)

    t = Table(box=box.SIMPLE_HEAVY, title="durq benchmark", title_style="bold")
    t.add_column("metric", no_wrap=True)
    t.add_column("unit")
    t.add_column("durq", justify="right")
    t.add_column("target", justify="left", no_wrap=True)
    t.add_column("pass", justify="center")
    t.add_column("SqliteHuey", justify="right")
    t.add_column("persist-queue", justify="right")
    t.add_column("durq/huey", justify="right")
    t.add_column("durq/pq", justify="right")
    for row in table:
        got = value(results, row.durq)
        target, ok = verdict(row, results)
        mark = (
            Text("—") if ok is None else Text("PASS", "green") if ok else Text("FAIL", "bold red")
        )
        case = results.get(row.durq[0]) or {}
        durq_cell = Text("error", "red") if "error" in case else Text(fmt(got, row.unit))
        h, p = value(results, row.huey), value(results, row.pq)
        t.add_row(
            row.metric,
            row.unit,
            durq_cell,
            target,
            mark,
            fmt(h, row.unit),
            fmt(p, row.unit),
            ratio(got, h),
            ratio(got, p),
        )
    console.print(t)
    console.print(
        "ratios are durq ÷ peer: above 1 means durq is faster for jobs/s rows, slower for ms rows. "
        "Peers appear in the rows of their default durability."
    )
    errors = {k: v["error"] for k, v in results.items() if "error" in v}
    for name, error in errors.items():
        console.print(Text.assemble((f"error in {name}: ", "bold red"), error))
