"""The fair claim's row of issue 15 alone: ``python -m bench.fair_rounds [--rounds 5]
[--jobs 10000]``. Interleaved rounds of the plain drain and the fair drain (100 tenants),
both at concurrency 10 on SQLite FULL, exactly as in bench/workflows.py, so a change in
the machine's load hits both sides of a pair alike. Prints each pair (rates, the claimer
thread's CPU per job) and the medians, with ``uptime`` before and after.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from bench.common import median
from bench.workflows import run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    print("uptime:", os.getloadavg())
    ratios: list[float] = []
    seen: dict[str, list[dict[str, float]]] = {"plain": [], "fair": []}
    with tempfile.TemporaryDirectory(prefix="durq-fair-") as base:
        for i in range(args.rounds):
            pair = {name: run(base, name, args.jobs, 1000, 10) for name in ("plain", "fair")}
            for name, got in pair.items():
                seen[name].append(got)
            ratios.append(pair["fair"]["rate"] / pair["plain"]["rate"])
            print(
                f"round {i + 1}: plain {pair['plain']['rate']:,.0f}/s "
                f"(claimer {pair['plain']['claimer_cpu_us_per_job']:.1f} µs/job), "
                f"fair {pair['fair']['rate']:,.0f}/s "
                f"(claimer {pair['fair']['claimer_cpu_us_per_job']:.1f} µs/job), "
                f"ratio {ratios[-1]:.2f}",
                flush=True,
            )
    for name, runs in seen.items():
        rate = median([r["rate"] for r in runs])
        claimer = median([r["claimer_cpu_us_per_job"] for r in runs])
        cpu = median([r["cpu_us_per_job"] for r in runs])
        print(f"{name}: median {rate:,.0f}/s, claimer {claimer:.1f} µs/job, process {cpu:.1f}")
    print(f"fair ÷ plain: median {median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")
    print("uptime:", os.getloadavg())


if __name__ == "__main__":
    main()
