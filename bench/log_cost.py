"""What per-job events at the default ``info`` level cost, in instructions (callgrind).

Wall time on a shared machine moves by more than the 10 % this bounds, so this counts
instructions instead: one worker process (SQLite, FULL, concurrency 4, JSON lines to a file
as ``durq worker`` writes them to stderr) drains ``small`` and then ``large`` no-op jobs
under ``valgrind --tool=callgrind``, at ``warning`` and at ``info``. The difference between
the two sizes, divided by the jobs between them, is the cost of one job without start-up;
info's figure over warning's is the events' share.

    python -m bench.log_cost                 # 500 and 2,500 jobs (about 4 minutes)
    python -m bench.log_cost --small 200 --large 1200

Not part of ``make bench`` (callgrind runs ~50x slower); ``make bench`` prints the drain
rate and the worker's CPU per job at info next to warning (``drain_logs``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.cases import fill
from bench.common import REPO_ROOT, case_dir
from bench.durq_app import make_app

#: The drain the worker runs under callgrind (argv: database path, level, log path).
DRAIN = """
import logging, sys
from durq.observability import logs
from bench.durq_app import make_app
out = open(sys.argv[3], "w")
logs.configure("json", getattr(logging, sys.argv[2].upper()), stream=out)
app = make_app("sqlite:///" + sys.argv[1])
_ = app.dq.store
app.dq.worker(concurrency=4, lease=30).run(install_signals=False, stop_when_idle=True)
app.dq.close()
"""


def instructions(directory: Path, jobs: int, level: str) -> tuple[int, int]:
    """Instructions of one drain of ``jobs`` no-ops at ``level``, and the lines it logged."""
    db, log = directory / f"{level}-{jobs}.db", directory / f"{level}-{jobs}.jsonl"
    app = make_app(f"sqlite:///{db}")
    try:
        fill(app, jobs, 500)
    finally:
        app.dq.close()
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={directory / 'cg.out'}",
         sys.executable, "-c", DRAIN, str(db), level, str(log)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800, check=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        raise RuntimeError(f"no callgrind total in: {done.stderr[-500:]}")
    return int(found.group(1)), sum(1 for _ in log.open())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.log_cost")
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=2500)
    parser.add_argument("--dir", default=None, help="where the databases go (default: /tmp)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    per_job: dict[str, float] = {}
    with case_dir(args.dir or "/tmp", "log-cost") as d:
        for level in ("warning", "info"):
            small, _ = instructions(d, args.small, level)
            large, lines = instructions(d, args.large, level)
            per_job[level] = (large - small) / (args.large - args.small)
            print(f"{level:<8} {per_job[level]:>10,.0f} instructions a job ({lines:,} lines)")
    cost = per_job["info"] / per_job["warning"] - 1
    print(f"info costs {cost:.1%} of the drain (target: at most 10 %)")


if __name__ == "__main__":
    main()
