"""``python -m bench.async_stall [--pg URL] [--n 1000]``: the event loop's worst stall
while an asyncio program does N ``await task.aenqueue(...)`` (issue 16 §5: no stall over
5 ms). A ticker coroutine records the time between its turns; the figure is the largest
gap, next to the median gap and the enqueue rate. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import durq


async def measure(dq: durq.Durq, n: int) -> dict[str, float]:
    @dq.task
    def noop(i: int) -> None: ...

    await asyncio.to_thread(dq.store.migrate)
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    for i in range(n):
        await noop.aenqueue(i=i)
    took = time.perf_counter() - start
    stop.set()
    await tick
    return {
        "enqueues": n,
        "enqueues_per_s": n / took,
        "max_stall_ms": max(gaps) * 1000,
        "median_gap_ms": statistics.median(gaps) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default=None, help="a postgresql:// URL (default: SQLite)")
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.pg or f"sqlite:///{Path(tmp) / 'stall.db'}"
        dq = durq.Durq(url)
        try:
            figures = asyncio.run(measure(dq, args.n))
        finally:
            dq.close()
    for key, value in figures.items():
        print(f"{key:16} {value:10.3f}")


if __name__ == "__main__":
    main()
