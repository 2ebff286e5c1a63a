"""``python -m bench.idle_poll [--n 20] [--gap 1.5]``: an idle SQLite worker's CPU use and
the enqueue-to-start time of jobs that arrive while it idles (issue 16 §7: idle CPU down
from 5-8 % of a core, enqueue-to-start under 5 ms at the median).

A worker process runs ``bench.durq_app`` on a fresh database; the CPU it uses over
``--idle`` seconds with nothing to do is read from /proc (Linux). Then ``--n`` jobs are
enqueued ``--gap`` seconds apart (longer than the claimer's 1 s before it backs off), and
each job's ``started_at - created_at`` (both from the store's clock) is the figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import durq

APP = """
import durq, os
dq = durq.Durq(os.environ["BENCH_URL"])

@dq.task
def noop() -> None: ...
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--gap", type=float, default=1.5)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'idle.db'}"
        (Path(tmp) / "idle_app.py").write_text(APP)
        dq = durq.Durq(url)
        dq.store.migrate()
        env = {**os.environ, "BENCH_URL": url, "PYTHONPATH": tmp}
        worker = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", "idle_app:dq", "--no-prune"],
            env=env, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(3.0)  # started and past the claimer's busy second
            before, t0 = cpu_seconds(worker.pid), time.monotonic()
            time.sleep(args.idle)
            idle_cpu = (cpu_seconds(worker.pid) - before) / (time.monotonic() - t0)
            latencies = []
            for _ in range(args.n):
                job = dq.enqueue("noop", {})
                job.wait(timeout=10)
                latencies.append((float(job.started_at or 0) - job.created_at) * 1000)
                time.sleep(args.gap)
        finally:
            worker.terminate()
            worker.wait(30)
            dq.close()
    print(f"idle worker CPU        {100 * idle_cpu:6.2f} % of a core")
    print(f"enqueue-to-start p50   {statistics.median(latencies):6.2f} ms (n={args.n})")
    print(f"enqueue-to-start max   {max(latencies):6.2f} ms")


if __name__ == "__main__":
    main()
