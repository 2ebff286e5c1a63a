"""The durq app the benchmark uses, in the parent (to enqueue) and in worker children.

Tasks are routed by name, so a parent and a child that both call :func:`make_app` with
the same URL see the same tasks. ``python -m bench.worker_proc`` takes the URL from
``--url`` or, failing that, from the ``BENCH_DURQ_URL`` environment variable.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import durq

URL_ENV = "BENCH_DURQ_URL"


#: An AES key (URL-safe base64) in this variable turns on durq.codecs.Encrypted (the
#: encrypted-payload row); parent and worker child both read it.
KEY_ENV = "BENCH_DURQ_KEY"


@dataclass
class App:
    dq: durq.Durq
    noop: durq.Task[Any, Any]
    stamp: durq.Task[Any, Any]
    fair: durq.Task[Any, Any]
    nap: durq.Task[Any, Any]


def make_app(url: str | None = None) -> App:
    """A Durq app on ``url`` (default ``$BENCH_DURQ_URL``) with the two benchmark tasks.

    ``noop`` does nothing; ``fair`` does nothing for a tenant (its ``fair_key``); ``stamp`` returns ``time.time()`` when it starts, which the
    idle-pickup case compares with the moment the producer's enqueue committed.
    """
    key = os.environ.get(KEY_ENV)
    codec = None
    if key:
        from durq.codecs import Encrypted

        codec = Encrypted([("bench", key)])
    dq = durq.Durq(url or os.environ[URL_ENV], codec=codec)

    def noop() -> None:
        return None

    def fair(tenant: str, blob: str = "") -> None:
        return None

    def stamp() -> float:
        return time.time()

    def nap(ms: float) -> None:  # the recovery case's 5 ms jobs
        time.sleep(ms / 1000)

    return App(
        dq,
        dq.task(noop),
        dq.task(stamp),
        dq.task(fair_key=lambda p: str(p["tenant"]))(fair),
        dq.task(max_attempts=10)(nap),
    )
