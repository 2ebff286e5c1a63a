"""``python -m bench [--quick] [--json FILE] [--dir DIR] [--only CASES] [--profile]``.

Runs every case one after the other (never two at once: the figures would compete for
the CPU), prints the machine and the table, and optionally writes everything as JSON.
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

from bench import cases
from bench.common import machine_info
from bench.report import Results, render, rows, table_rows


def plan(base: str, sizes: cases.Sizes) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """(case name, thunk) in the order they run."""
    out: list[tuple[str, Callable[[], dict[str, Any]]]] = [
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
    out += [
        ("pickup", lambda: cases.durq_pickup(base, sizes.latency_samples, sizes.latency_gap)),
        ("memory", lambda: cases.durq_memory(base, sizes.memory_jobs, sizes.chunk)),
        ("history", lambda: cases.durq_history(base, sizes)),
        ("huey", lambda: cases.huey_enqueue_drain(base, sizes.peer_jobs)),
        ("huey_pickup", lambda: cases.huey_pickup(base, sizes.latency_samples, sizes.latency_gap)),
        ("pq", lambda: cases.pq_put_get(base, sizes.peer_jobs)),
    ]
    return out


def run_profile(console: Console, base: str, sizes: cases.Sizes) -> None:
    out = Path(tempfile.mkdtemp(prefix="durq-bench-profile-", dir=base)) / "drain.pstats"
    console.print(f"profiling the drain of {sizes.drain:,} jobs (FULL, concurrency 10) → {out}")
    figures = cases.durq_profile(base, sizes.drain, sizes.chunk, 10, out)
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
    parser.add_argument("--only", default="", help="comma-separated case names (for debugging)")
    parser.add_argument(
        "--profile", action="store_true", help="profile one drain and print the hot spots"
    )
    args = parser.parse_args(argv)

    sizes = cases.QUICK if args.quick else cases.FULL
    console = Console(width=None if sys.stdout.isatty() else 150)
    progress = Console(stderr=True)
    if args.profile:
        run_profile(console, args.dir, sizes)
        return 0

    machine = machine_info(args.dir)
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    results: Results = {}
    began = time.perf_counter()
    for name, thunk in plan(args.dir, sizes):
        if wanted and name not in wanted:
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

    table = rows(sizes.concurrencies, machine["sqlite_default_synchronous"], sizes.as_dict())
    render(console, machine, results, table)
    console.print(f"[dim]{'quick' if args.quick else 'full'} run, {total:.0f}s[/dim]")
    if args.json:
        doc = {
            "machine": machine,
            "mode": "quick" if args.quick else "full",
            "sizes": sizes.as_dict(),
            "seconds": total,
            "results": results,
            "table": table_rows(results, table),
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    failed = any("error" in r for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
