"""The app of the process-pool rows (``bench/pools.py``), at the top level of a module as
``--pool processes`` needs it: each child imports it from here. ``$BENCH_DURQ_URL`` names
the database (read when the module is imported).

``noop`` does nothing (the same task name as ``bench/durq_app.py``'s, so the parent
enqueues with either app); ``spin`` runs a fixed pure-Python loop of ``n`` steps (the
parent picks ``n`` so that one call takes about 20 ms on this machine), the same work
whichever pool runs it.
"""

from __future__ import annotations

import os

import durq
from bench.durq_app import URL_ENV

dq = durq.Durq(os.environ.get(URL_ENV, "sqlite:///bench-pool.db"))


@dq.task
def noop() -> None:
    return None


@dq.task
def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total
