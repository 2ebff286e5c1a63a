"""Turning figures into the printed table (rich) and the JSON document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

Results = dict[str, dict[str, Any]]
Ref = tuple[str, str]


@dataclass(frozen=True)
class Row:
    """One line of the table.

    ``durq`` and the values of ``peers`` (keyed by :attr:`Peer.key`) are ``(case, field)``
    references into the results; ``op``/``bound`` is the target (``>=``, ``<=``, ``<``;
    ``within`` compares with the ``ref`` row's durq figure; ``ratio``: the figure at ``ref``
    is already a ratio to a reference, at least ``bound``, and is shown in the ratio column).
    """

    metric: str
    unit: str
    durq: Ref
    op: str = ""
    bound: float = 0.0
    ref: Ref | None = None
    peers: dict[str, Ref | None] = field(default_factory=dict)
    lower_is_better: bool = False


@dataclass(frozen=True)
class Peer:
    """A peer column: ``key`` in the JSON rows, ``title`` as the column header and
    ``short`` in the ratio column's header (``durq/<short>``)."""

    key: str
    title: str
    short: str
    floor: bool = False  # the raw-SQL floor, not a library: its own ratio column


@dataclass(frozen=True)
class Section:
    """One printed table: its rows and the peers it compares with; ``key`` names it in the
    JSON document."""

    key: str
    title: str
    peers: tuple[Peer, ...]
    rows: list[Row]
    note: str
    ratio_title: str = "durq/best peer"  # the header of the ratio column ("": none)


SQLITE_PEERS = (
    Peer("huey", "SqliteHuey", "huey"),
    Peer("persist_queue", "persist-queue", "pq"),
    Peer("litequeue", "litequeue", "lq"),
    Peer("floor1", "raw SQL, 1/tx", "floor 1/tx", floor=True),
    Peer("floor100", "raw SQL, 100/tx", "floor 100/tx", floor=True),
)
PG_PEERS = (
    Peer("procrastinate", "procrastinate", "procr."),
    Peer("pgqueuer", "pgqueuer", "pgq"),
    Peer("floor1", "raw SQL, 1/stmt", "floor 1/stmt", floor=True),
)


def sqlite_section(
    concurrencies: tuple[int, ...], peer_sync: str, sizes: dict[str, Any]
) -> Section:
    return Section(
        "table",
        "durq benchmark (SQLite)",
        SQLITE_PEERS,
        rows(concurrencies, peer_sync, sizes),
        "Peers appear in the rows of their default durability.",
    )


def rows(concurrencies: tuple[int, ...], peer_sync: str, sizes: dict[str, Any]) -> list[Row]:
    """The SQLite table's rows. Peers run at their default durability (``peer_sync``), so
    their figures sit in the rows of the same ``synchronous`` level."""

    def peer(sync: str, case: str, field: str) -> tuple[str, str] | None:
        return (case, field) if sync == peer_sync else None

    def lq(sync: str, field: str) -> tuple[str, str] | None:
        return ("litequeue", field) if sync == "NORMAL" else None  # it sets NORMAL itself

    def floors(sync: str, what: str) -> dict[str, Ref | None]:
        case = f"floor_{sync.lower()}"
        return {"floor1": (case, f"{what}_1_rate"), "floor100": (case, f"{what}_100_rate")}

    n_one, n_many, n_drain = sizes["enqueue_one"], sizes["enqueue_many"], sizes["drain"]
    hist, hc = sizes["history_drain"], sizes["history_concurrency"]
    out = [
        Row(
            f"enqueue one at a time ({n_one:,}), FULL",
            "jobs/s",
            ("enqueue_one_full", "rate"),
            ">=",
            5_000,
            peers={
                "huey": peer("FULL", "huey", "enqueue_rate"),
                "persist_queue": peer("FULL", "pq", "put_rate"),
                "litequeue": lq("FULL", "put_rate"),
                "floor1": ("floor_full", "enqueue_one_rate"),
            },
        ),
        Row(
            f"enqueue one at a time ({n_one:,}), NORMAL",
            "jobs/s",
            ("enqueue_one_normal", "rate"),
            ">=",
            25_000,
            peers={
                "huey": peer("NORMAL", "huey", "enqueue_rate"),
                "persist_queue": peer("NORMAL", "pq", "put_rate"),
                "litequeue": lq("NORMAL", "put_rate"),
                "floor1": ("floor_normal", "enqueue_one_rate"),
            },
        ),
        Row(
            "enqueue one at a time ÷ raw one-row commit, paired, FULL",
            "x",
            ("enqueue_one_full", "paired_ratio"),
            ">=",
            0.9,
        ),
        Row(
            "enqueue one at a time ÷ raw one-row commit, paired, NORMAL",
            "x",
            ("enqueue_one_normal", "paired_ratio"),
            ">=",
            0.9,
        ),
        Row(
            f"enqueue_many ({n_many:,} in chunks of {sizes['chunk']:,}), FULL",
            "jobs/s",
            ("enqueue_many", "rate"),
            ">=",
            100_000,
            peers={"floor100": ("floor_full", "enqueue_100_rate")},
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
                    peers={
                        "huey": peer(sync, "huey", "drain_rate"),
                        "persist_queue": peer(sync, "pq", "drain_rate"),
                        "litequeue": lq(sync, "drain_rate"),
                        **floors(sync, "drain"),
                    },
                )
            )
    for c in sizes["info_concurrencies"]:
        out.append(
            Row(
                f"drain {n_drain:,} no-ops, FULL, concurrency {c}, log level info (default)",
                "jobs/s",
                (f"drain_full_c{c}_info", "rate"),
                "within",
                0.10,  # events at info cost at most 10 % of the drain (issue 14 item 2)
                ref=(f"drain_full_c{c}", "rate"),
                peers={
                    "huey": peer("FULL", "huey", "drain_rate"),
                    "persist_queue": peer("FULL", "pq", "drain_rate"),
                    **floors("FULL", "drain"),
                },
            )
        )
    out += [
        Row(
            "idle pickup latency, median",
            "ms",
            ("pickup", "median_ms"),
            "<=",
            2.0,
            peers={"huey": ("huey_pickup", "median_ms")},
            lower_is_better=True,
        ),
        Row(
            "idle pickup latency, p99",
            "ms",
            ("pickup", "p99_ms"),
            "<=",
            10.0,
            peers={"huey": ("huey_pickup", "p99_ms")},
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
        *dashboard_rows("dashboard", sizes["dashboard_rows"]),
        Row(
            f"drain {sizes['log_drain']:,} no-ops, c{sizes['log_concurrency']}, events at warning",
            "jobs/s",
            ("drain_logs", "warning_rate"),
        ),
        Row(
            f"drain {sizes['log_drain']:,} no-ops, c{sizes['log_concurrency']}, events at info (default)",
            "jobs/s",
            ("drain_logs", "info_rate"),
            "within",
            0.10,
            ref=("drain_logs", "warning_rate"),
        ),
        Row("worker CPU per job, events at warning", "µs", ("drain_logs", "warning_cpu_us"),
            lower_is_better=True),
        Row("worker CPU per job, events at info (default)", "µs", ("drain_logs", "info_cpu_us"),
            lower_is_better=True),
    ]  # fmt: skip
    return out


def dashboard_rows(case: str, rows: int) -> list[Row]:
    """The dashboard's request times on a table of ``rows`` jobs (bench/dashboard_cases.py)."""
    return [
        Row(f"dashboard jobs page, first, on {rows:,} jobs, median", "ms",
            (case, "jobs_first_ms"), "<", 100.0, lower_is_better=True),
        Row(f"dashboard jobs page 50 deep in 'failed', on {rows:,} jobs, median", "ms",
            (case, "jobs_deep_ms"), "<", 100.0, lower_is_better=True),
        Row(f"dashboard overview, on {rows:,} jobs, median", "ms",
            (case, "overview_ms"), "<", 200.0, lower_is_better=True),
    ]  # fmt: skip


def pg_section(sizes: dict[str, Any]) -> Section:
    """The PostgreSQL table: durq against procrastinate and pgqueuer on the same server."""
    n_one, n_many, chunk = sizes["pg_enqueue_one"], sizes["pg_enqueue_many"], sizes["chunk"]
    n_drain, workers = sizes["pg_drain"], sizes["pg_workers"]
    n_proc, n_peer = sizes["pg_procrastinate_jobs"], sizes["pg_peer_jobs"]
    floor: Ref = ("pg_floor", "drain_1_rate")
    out = [
        Row(
            f"enqueue one at a time ({n_one:,})",
            "jobs/s",
            ("pg_enqueue_one", "rate"),
            ">=",
            1_500,
            peers={
                "procrastinate": ("procrastinate_c1", "defer_rate"),
                "pgqueuer": ("pgqueuer", "enqueue_one_rate"),
                "floor1": ("pg_floor", "enqueue_one_rate"),
            },
        ),
        Row(
            "enqueue one at a time ÷ raw one-row INSERT commit, paired",
            "x",
            ("pg_enqueue_one", "paired_ratio"),
            ">=",
            0.8,
        ),
        *(
            Row(
                f"enqueue one at a time, {n} producer {kind} ÷ as many raw INSERTs, paired",
                "x",
                (f"pg_enqueue_{n}_{kind}", "paired_ratio"),
                ">=",
                0.8,
            )
            for n, kind in ((4, "threads"), (8, "threads"), (4, "processes"))
        ),
        Row(
            f"enqueue_many ({n_many:,}, chunks of {chunk:,})",
            "jobs/s",
            ("pg_enqueue_many", "rate"),
            ">=",
            50_000,
            peers={
                "procrastinate": ("procrastinate_c1", "batch_defer_rate"),
                "pgqueuer": ("pgqueuer", "batch_enqueue_rate"),
            },
        ),
    ]
    for c in sizes["pg_concurrencies"]:
        out.append(
            Row(
                f"drain {n_drain:,} no-ops, {workers} processes x c{c}",
                "jobs/s",
                (f"pg_drain_{workers}x{c}", "rate"),
                ">=",
                8_000,
                peers={"floor1": floor},
            )
        )
    for c in sizes["pg_single_concurrencies"]:
        out.append(
            Row(
                f"drain {n_peer:,} no-ops, 1 process, durq c{c}",
                "jobs/s",
                (f"pg_drain_1x{c}", "rate"),
                peers={"pgqueuer": ("pgqueuer", "drain_rate"), "floor1": floor},
            )
        )
    for c in sizes["pg_procrastinate_concurrencies"]:
        out.append(
            Row(
                f"drain {n_proc:,} no-ops, 1 process, concurrency {c}",
                "jobs/s",
                (f"pg_drain_1x{c}", "rate"),
                peers={
                    "procrastinate": (f"procrastinate_c{c}", "drain_rate"),
                    "pgqueuer": ("pgqueuer", "drain_rate") if c == 1 else None,
                    "floor1": floor,
                },
            )
        )
    out += [
        Row(
            "idle pickup latency, median",
            "ms",
            ("pg_pickup", "median_ms"),
            "<=",
            5.0,
            peers={"pgqueuer": ("pgqueuer_pickup", "median_ms")},
            lower_is_better=True,
        ),
        Row(
            "idle pickup latency, p99",
            "ms",
            ("pg_pickup", "p99_ms"),
            "<=",
            20.0,
            peers={"pgqueuer": ("pgqueuer_pickup", "p99_ms")},
            lower_is_better=True,
        ),
    ]
    out += dashboard_rows("pg_dashboard", sizes["dashboard_rows"])
    return Section(
        "pg_table",
        "durq benchmark (PostgreSQL)",
        PG_PEERS,
        out,
        "Every PostgreSQL figure comes from the same server in the same run.",
    )


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
    if row.op == "ratio":
        ratio_value = value(results, row.ref)
        text = f"≥ {row.bound:.0%} of plain"
        return text, None if ratio_value is None else ratio_value >= row.bound
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


def best_peer(row: Row, section: Section, results: Results) -> tuple[str, float | None]:
    """The best library figure in the row (highest rate, lowest latency) and its peer's
    short name; floors are not libraries and are left out."""
    found = [
        (peer.short, x)
        for peer in section.peers
        if not peer.floor and (x := value(results, row.peers.get(peer.key))) is not None
    ]
    if not found:
        return "", None
    pick = min if row.lower_is_better else max
    return pick(found, key=lambda item: item[1])


def fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "jobs/s":
        return f"{x:,.0f}"
    if unit in ("ms", "x"):
        return f"{x:.2f}"
    if unit == "instr":
        return f"{x:,.0f}"
    return f"{x:.1f}"


def ratio(durq_value: float | None, peer_value: float | None) -> str:
    if durq_value is None or peer_value is None or peer_value == 0:
        return "—"
    return f"{durq_value / peer_value:.2f}x"


def failed(results: Results, ref: Ref | None) -> bool:
    return ref is not None and "error" in (results.get(ref[0]) or {})


def table_rows(results: Results, section: Section) -> list[dict[str, Any]]:
    """One table as plain data (for ``--json``)."""
    out = []
    for row in section.rows:
        target, ok = verdict(row, results)
        item: dict[str, Any] = {
            "metric": row.metric,
            "unit": row.unit,
            "durq": value(results, row.durq),
            "target": target,
            "pass": ok,
        }
        for peer in section.peers:
            item[peer.key] = value(results, row.peers.get(peer.key))
            if peer.floor and item["durq"] and item[peer.key]:
                item[f"ratio_{peer.key}"] = item["durq"] / item[peer.key]
        name, best = best_peer(row, section, results)
        item["best_peer"] = name
        item["ratio_best_peer"] = item["durq"] / best if item["durq"] and best else None
        if row.op == "ratio":
            item["ratio"] = value(results, row.ref)
        item["error"] = (results.get(row.durq[0]) or {}).get("error")
        out.append(item)
    return out


def render_header(console: Console, machine: dict[str, Any], sqlite: bool) -> None:
    """The machine, the versions and the durability every library ran with."""
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    header.add_row(
        "machine", f"{machine['cores']} cores · {machine['cpu']} · {machine['platform']}"
    )
    header.add_row("python", f"{machine['implementation']} {machine['python']}")
    if sqlite:
        header.add_row("sqlite", machine["sqlite"])
        header.add_row("bench dir", f"{machine['bench_dir']} on {machine['filesystem']}")
        header.add_row(
            "versions",
            f"durq {machine['durq']} · huey {machine['huey']} · "
            f"persist-queue {machine['persist-queue']}",
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
            "SQLiteAckQueue defaults: WAL, auto_commit=True, synchronous not set → "
            f"SQLite default ({sync})",
        )
    pg = machine.get("postgres")
    if pg:
        header.add_row(
            "postgresql",
            f"{pg['server_version']} at {pg['url']} · synchronous_commit={pg['synchronous_commit']}"
            f" · fsync={pg['fsync']} · full_page_writes={pg['full_page_writes']}"
            f" · wal_sync_method={pg['wal_sync_method']}",
        )
        header.add_row(
            "pg versions",
            f"durq {machine['durq']} · psycopg {machine['psycopg']} · "
            f"procrastinate {machine['procrastinate']} · pgqueuer {machine['pgqueuer']}",
        )
        header.add_row(
            "pg durability",
            f"all three commit every job change with the server's synchronous_commit "
            f"({pg['synchronous_commit']}); none sets it per session. durq: own schema per "
            "case, pool_size 8 (default). procrastinate: defaults, async no-op task. "
            "pgqueuer: defaults (durability=durable: every table LOGGED), batch_size 10",
        )
    console.print(header)


def render_section(console: Console, results: Results, section: Section) -> None:
    t = Table(box=box.SIMPLE_HEAVY, title=section.title, title_style="bold")
    t.add_column("metric", no_wrap=True)
    t.add_column("unit")
    t.add_column("durq", justify="right")
    t.add_column("target", justify="left", no_wrap=True)
    t.add_column("pass", justify="center")
    for peer in section.peers:
        t.add_column(peer.title, justify="right")
    if section.ratio_title:
        t.add_column(section.ratio_title, justify="right")
    for peer in section.peers:
        if peer.floor:
            t.add_column(f"durq/{peer.short}", justify="right")
    for row in section.rows:
        got = value(results, row.durq)
        target, ok = verdict(row, results)
        mark = (
            Text("—") if ok is None else Text("PASS", "green") if ok else Text("FAIL", "bold red")
        )
        durq_cell = Text("error", "red") if failed(results, row.durq) else Text(fmt(got, row.unit))
        refs = [row.peers.get(peer.key) for peer in section.peers]
        figures = [value(results, ref) for ref in refs]
        cells = [
            Text("error", "red") if failed(results, ref) else Text(fmt(x, row.unit))
            for ref, x in zip(refs, figures, strict=True)
        ]
        best = best_peer(row, section, results)
        shown = ratio(got, best[1]) + (f" ({best[0]})" if best[0] else "")
        if row.op == "ratio":  # a paired ratio, not durq ÷ the peer's median
            paired = value(results, row.ref)
            shown = "—" if paired is None else f"{paired:.2f}x"
        t.add_row(
            row.metric,
            row.unit,
            durq_cell,
            target,
            mark,
            *cells,
            *([shown] if section.ratio_title else []),
            *(ratio(got, x) for p, x in zip(section.peers, figures, strict=True) if p.floor),
        )
    console.print(t)
    console.print(
        "ratios are durq ÷ the best library in the row (in brackets) and ÷ the raw-SQL "
        "floor: above 1 means durq is faster for jobs/s rows, slower for ms rows. "
        f"{section.note}"
    )


def render(
    console: Console, machine: dict[str, Any], results: Results, sections: list[Section]
) -> None:
    render_header(console, machine, any(s.peers == SQLITE_PEERS for s in sections))
    for section in sections:
        render_section(console, results, section)
    errors = {k: v["error"] for k, v in results.items() if "error" in v}
    for name, error in errors.items():
        console.print(Text.assemble((f"error in {name}: ", "bold red"), error))
