"""A producer child for the concurrent PostgreSQL enqueue case (bench/pg_cases.py
``durq_enqueue_concurrent``): ``python -m bench.producer_proc --url URL --mode M --threads N``.

Modes: ``durq`` (``noop.enqueue()`` on one app: its pool shared by the threads) and
``floor`` (bench/floor.py ``PG_INSERT``, each thread on a psycopg connection of its own).
Prints ``{"event": "ready"}`` once warm, then for each ``run SECONDS`` line on stdin runs
its threads for that long and prints ``{"count": ..., "seconds": ...}``; ``stop`` ends it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from bench.common import emit
from bench.durq_app import make_app
from bench.floor import PG_INSERT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", choices=("durq", "floor"), required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ops: list[Callable[[], object]] = []
    if args.mode == "durq":
        app = make_app(args.url)
        _ = app.dq.store
        ops = [app.noop.enqueue] * args.threads
    else:
        import psycopg

        schema = args.url.split("schema=", 1)[1].split("&", 1)[0]
        insert = PG_INSERT.format(s=f'"{schema}"')
        base = args.url.split("?", 1)[0]
        for _ in range(args.threads):
            conn = psycopg.connect(base, autocommit=True)
            ops.append(lambda conn=conn: conn.execute(insert))
    for op in ops:  # warm: statements prepared, pool connections open
        for _ in range(10):
            op()
    emit({"event": "ready"})
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "stop":
            break
        seconds = float(words[1])
        counts = [0] * len(ops)

        def loop(i: int, stop: float, counts: list[int] = counts) -> None:
            op, n = ops[i], 0
            while time.perf_counter() < stop:
                op()
                n += 1
            counts[i] = n

        start = time.perf_counter()
        threads = [
            threading.Thread(target=loop, args=(i, start + seconds)) for i in range(len(ops))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        emit({"count": sum(counts), "seconds": time.perf_counter() - start})


if __name__ == "__main__":
    main()
