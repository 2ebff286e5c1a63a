"""``python -m bench [--quick] [--pg] [--pg-url URL] [--json FILE] [--dir DIR] [--only CASES]
[--profile]``.

Runs every case one after the other (never two at once: the figures would compete for
the CPU), prints the machine and the tables, and optionally writes everything as JSON.
The PostgreSQL cases run with ``--pg`` (only them), and in a full run when the server
answers; when it does not, one line says they were skipped and why.
"""

from __future__ import annotations

import argparse
import json
import pstats
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import (
    cases,
    dashboard_cases,
    floor,
    litequeue_case,
    memory_long,
    pg_cases,
    pools,
    recovery,
    targets,
    workflows,
)
from bench.common import machine_info
from bench.pg import default_pg_url, server_info
from bench.report import Results, Section, pg_section, render, sqlite_section, table_rows

Plan = list[tuple[str, Callable[[], dict[str, Any]]]]


def plan(base: str, sizes: cases.Sizes) -> Plan:
    """The SQLite cases: (case name, thunk) in the order they run."""
    out: Plan = [
        ("enqueue_one_full", lambda: cases.durq_enqueue_one(base, sizes.enqueue_one, None)),
        ("enqueue_one_normal", lambda: cases.durq_enqueue_one(base, sizes.enqueue_one, "normal")),
        ("enqueue_many", lambda: cases.durq_enqueue_many(base, sizes.enqueue_many, sizes.chunk)),
    ]
    for sync in ("full", "normal"):
        for c in sizes.concurrencies:

            def drain(c: int = c, sync: str = sync) -> dict[str, Any]:
                mode = None if sync == "full" else sync
                return cases.durq_drain(base, sizes.drain, sizes.chunk, c, mode)

            out.append((f"drain_{sync}_c{c}", drain))
    for c in sizes.info_concurrencies:

        def drain_info(c: int = c) -> dict[str, Any]:
            return cases.durq_drain(base, sizes.drain, sizes.chunk, c, None, "info")

        out.append((f"drain_full_c{c}_info", drain_info))
    out += [
        ("floor_full", lambda: floor.sqlite_floor(base, sizes.floor_jobs, None)),
        ("floor_normal", lambda: floor.sqlite_floor(base, sizes.floor_jobs, "normal")),
        ("litequeue", lambda: litequeue_case.litequeue_put_pop(base, sizes.peer_jobs)),
        ("pickup", lambda: cases.durq_pickup(base, sizes.latency_samples, sizes.latency_gap)),
        ("memory", lambda: cases.durq_memory(base, sizes.memory_jobs, sizes.chunk)),
        ("history", lambda: cases.durq_history(base, sizes)),
        ("huey", lambda: cases.huey_enqueue_drain(base, sizes.peer_jobs)),
        ("huey_pickup", lambda: cases.huey_pickup(base, sizes.latency_samples, sizes.latency_gap)),
        ("pq", lambda: cases.pq_put_get(base, sizes.peer_jobs)),
        (
            "dashboard",
            lambda: dashboard_cases.sqlite_dashboard(
                base, sizes.dashboard_rows, sizes.dashboard_repeats
            ),
        ),
        (
            "drain_logs",
            lambda: dashboard_cases.drain_logs(
                base, sizes.log_drain, sizes.chunk, sizes.log_concurrency
            ),
        ),
    ]
    out += workflows.plan(base, sizes)  # issue 15's rows
    out += recovery.plan(base)  # issue 11: recovery after kill -9
    out += pools.plan(base, sizes.drain, sizes.chunk, sizes.cpu_jobs, sizes.pool_rounds)
    return out


def pg_plan(base: str, url: str, sizes: cases.Sizes) -> Plan:
    """The PostgreSQL cases, in the order they run."""
    out: Plan = [
        ("pg_enqueue_one", lambda: pg_cases.durq_enqueue_one(url, sizes.pg_enqueue_one)),
        (
            "pg_enqueue_many",
            lambda: pg_cases.durq_enqueue_many(url, sizes.pg_enqueue_many, sizes.chunk),
        ),
    ]
    for producers, processes in ((4, False), (8, False), (4, True)):

        def concurrent(producers: int = producers, processes: bool = processes) -> dict[str, Any]:
            return pg_cases.durq_enqueue_concurrent(base, url, producers, processes)

        kind = "processes" if processes else "threads"
        out.append((f"pg_enqueue_{producers}_{kind}", concurrent))
    drains = [(sizes.pg_workers, c, sizes.pg_drain) for c in sizes.pg_concurrencies]
    drains += [(1, c, sizes.pg_peer_jobs) for c in sizes.pg_single_concurrencies]
    drains += [(1, c, sizes.pg_procrastinate_jobs) for c in sizes.pg_procrastinate_concurrencies]
    for workers, c, n in drains:

        def drain(workers: int = workers, c: int = c, n: int = n) -> dict[str, Any]:
            return pg_cases.durq_drain(base, url, n, sizes.chunk, workers, c)

        out.append((f"pg_drain_{workers}x{c}", drain))
    out.append(("pg_floor", lambda: floor.pg_floor(url, sizes.pg_floor_jobs)))
    out.append(
        (
            "pg_pickup",
            lambda: pg_cases.durq_pickup(base, url, sizes.latency_samples, sizes.latency_gap),
        )
    )
    for i, c in enumerate(sizes.pg_procrastinate_concurrencies):

        def procrastinate(c: int = c, first: bool = i == 0) -> dict[str, Any]:
            return pg_cases.procrastinate_case(base, url, sizes, c, measure_batch=first)

        out.append((f"procrastinate_c{c}", procrastinate))
    out += [
        ("pgqueuer", lambda: pg_cases.pgqueuer_case(base, url, sizes)),
        (
            "pgqueuer_pickup",
            lambda: pg_cases.pgqueuer_pickup(base, url, sizes.latency_samples, sizes.latency_gap),
        ),
        (
            "pg_dashboard",
            lambda: dashboard_cases.pg_dashboard(
                url, sizes.dashboard_rows, sizes.dashboard_repeats
            ),
        ),
    ]
    out += recovery.pg_plan(base, url)
    return out


def run_profile(console: Console, base: str, sizes: cases.Sizes, pg_url: str | None) -> None:
    out = Path(tempfile.mkdtemp(prefix="durq-bench-profile-", dir=base)) / "drain.pstats"
    if pg_url is None:
        console.print(f"profiling the drain of {sizes.drain:,} jobs (FULL, concurrency 10) → {out}")
        figures = cases.durq_profile(base, sizes.drain, sizes.chunk, 10, out)
    else:
        c = sizes.pg_single_concurrency
        console.print(
            f"profiling the drain of {sizes.pg_drain:,} jobs (PostgreSQL, one worker process, "
            f"concurrency {c}) → {out}"
        )
        figures = pg_cases.durq_profile(base, pg_url, sizes.pg_drain, sizes.chunk, c, out)
    console.print(f"{figures['rate']:,.0f} jobs/s under the profiler (every thread profiled)")
    stats = pstats.Stats(str(out), stream=sys.stdout)
    console.print("[bold]own time, every thread (idle threads show up as lock/queue waits)[/bold]")
    stats.sort_stats("tottime").print_stats(25)
    console.print("[bold]durq's own functions by cumulative time[/bold]")
    stats.sort_stats("cumulative").print_stats("durq", 30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts (under a minute)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    parser.add_argument(
        "--dir", default=tempfile.gettempdir(), help="where the temporary databases go"
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated case names; NAME* takes every case whose name starts with NAME "
        "(e.g. 'pool_*,celery_*': the pool rows)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="profile one drain and print the hot spots"
    )
    parser.add_argument(
        "--memory-1m",
        action="store_true",
        help="only the long memory case: one worker drains 1,000,000 jobs, RSS sampled",
    )
    parser.add_argument("--memory-jobs", type=int, default=1_000_000, help="jobs of --memory-1m")
    parser.add_argument("--pg", action="store_true", help="only the PostgreSQL cases")
    parser.add_argument(
        "--pg-url",
        default=default_pg_url(),
        help="the PostgreSQL server (default $BENCH_PG_URL or %(default)s); cases make and "
        "drop their own schemas and databases there",
    )
    args = parser.parse_args(argv)

    sizes = cases.QUICK if args.quick else cases.FULL
    console = Console(width=None if sys.stdout.isatty() else 240)
    progress = Console(stderr=True)
    if args.profile:
        run_profile(console, args.dir, sizes, args.pg_url if args.pg else None)
        return 0

    machine = machine_info(args.dir)
    if args.memory_1m:
        return run_memory_long(console, args.dir, args.memory_jobs, args.json, machine)
    patterns = {name.strip() for name in args.only.split(",") if name.strip()}

    def chosen(name: str) -> bool:
        return not patterns or any(
            name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns
        )

    todo: Plan = [] if args.pg else plan(args.dir, sizes)
    sections: list[Section] = []
    if not args.pg and any(chosen(name) for name, _ in todo):
        sections.append(
            sqlite_section(
                sizes.concurrencies, machine["sqlite_default_synchronous"], sizes.as_dict()
            )
        )
        sections.append(workflows.section(sizes.drain, sizes.workflow_counted))
        sections.append(recovery.section())
        sections.append(pools.section(sizes.drain))
    pg_todo = pg_plan(args.dir, args.pg_url, sizes)
    pg_skipped: str | None = None
    if args.pg or any(chosen(name) for name, _ in pg_todo):
        try:
            machine["postgres"] = server_info(args.pg_url)
        except Exception as exc:  # noqa: BLE001 - any failure to reach the server skips
            pg_skipped = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
            console.print(
                f"[yellow]PostgreSQL cases skipped: {args.pg_url} does not answer "
                f"({pg_skipped})[/yellow]",
                soft_wrap=True,
            )
            if args.pg:
                return 1
        else:
            todo += pg_todo
            sections.append(pg_section(sizes.as_dict()))
            if args.pg:
                sections.append(recovery.section())
    results: Results = {}
    began = time.perf_counter()
    for name, thunk in todo:
        if not chosen(name):
            continue
        t0 = time.perf_counter()
        progress.print(f"[dim]running {name} …[/dim]", end="")
        try:
            results[name] = thunk()
            progress.print(f"[dim] {time.perf_counter() - t0:.1f}s[/dim]")
        except Exception as exc:  # noqa: BLE001 - record the failing case and go on
            results[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            progress.print(f"[red] failed: {type(exc).__name__}[/red]")
    total = time.perf_counter() - began
    targets.derive(results)
    if "targets" in results:
        sections.append(targets.section())

    render(console, machine, results, sections)
    console.print(f"[dim]{'quick' if args.quick else 'full'} run, {total:.0f}s[/dim]")
    if args.json:
        doc: dict[str, Any] = {
            "machine": machine,
            "mode": "quick" if args.quick else "full",
            "sizes": sizes.as_dict(),
            "seconds": total,
            "results": results,
            "pg_skipped": pg_skipped,
        }
        for section in sections:
            doc[section.key] = table_rows(results, section)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    failed = any("error" in r for r in results.values())
    return 1 if failed else 0


def run_memory_long(
    console: Console, base: str, jobs: int, json_path: str | None, machine: dict[str, Any]
) -> int:
    """``--memory-1m``: the long memory case alone (bench/memory_long.py); prints the
    RSS curve and the verdict against issue 14's target (< 100 MB)."""
    console.print(f"[dim]running memory_long ({jobs:,} jobs) …[/dim]")
    figures = memory_long.durq_memory_long(base, jobs)
    for line in memory_long.curve(figures):
        console.print(line)
    verdict = "PASS" if figures["peak_mb"] < 100 else "FAIL"
    console.print(f"worker peak RSS {figures['peak_mb']:.1f} MB (target < 100 MB): {verdict}")
    if json_path:
        doc = {"machine": machine, "results": {"memory_long": figures}}
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
