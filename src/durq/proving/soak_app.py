"""The tasks that ``durq soak`` runs on real worker processes (:data:`APP`).

One routing name per behaviour that needs its own task settings; the payload's ``kind``
picks the behaviour of :func:`soak_work`:

``fast``       sleeps ``ms`` (a few milliseconds) and succeeds.
``slow``       sleeps ``ms`` (up to a few seconds, beyond a short ``--grace``) and succeeds.
``flaky``      raises a transient error on attempts ``1..fail_times``, then succeeds.
``permanent``  raises :class:`durq.Permanent`: fails at once.
``exhausted``  always raises a transient error: retried until its attempts run out, fails.
``expire``     enqueued with a delay longer than its deadline: expires before it may run.

``durq-soak-timeout`` (a ``def`` task) and ``durq-soak-atimeout`` (an ``async def`` task)
have a timeout of :data:`TIMEOUT` seconds; attempt 1 sleeps past it, later attempts return
at once: each succeeds on its second attempt.

Each run appends ``start`` before the work and ``end`` when the task body returns or raises
to the runs file (:func:`durq.proving.runs.record`, one ``O_APPEND`` write per line);
importing this module starts the parent watch, so a worker whose ``durq soak`` died stops
itself.
"""

from __future__ import annotations

import asyncio
import time

from durq.app import Durq
from durq.context import context
from durq.errors import Permanent
from durq.proving.runs import record, start_parent_watch
from durq.retry import constant

#: What ``durq soak``'s workers run (``MODULE:ATTR``).
APP = "durq.proving.soak_app:dq"
QUEUE = "durq-soak"
WORK_TASK = "durq-soak-work"
TIMEOUT_TASK = "durq-soak-timeout"
ATIMEOUT_TASK = "durq-soak-atimeout"
#: Seconds a timeout task's attempt may run.
TIMEOUT = 0.5
#: Seconds the first attempt of a timeout task sleeps (past :data:`TIMEOUT`).
OVERRUN = 1.5
#: Attempts of every soak job unless the producer says otherwise: far more than the
#: planned failures plus what a few kills and charged shutdowns can use up.
MAX_ATTEMPTS = 10
#: Backoff between attempts in seconds (short, so retried jobs finish within the soak).
BACKOFF = 0.3

#: The app :data:`APP` names; its URL comes from ``--db``/``DURQ_URL``.
dq = Durq()
start_parent_watch()


class SoakTransient(ConnectionError):
    """A planned transient failure (a ``ConnectionError``: classified as retryable)."""


@dq.task(name=WORK_TASK, queue=QUEUE, max_attempts=MAX_ATTEMPTS, backoff=constant(BACKOFF))
def soak_work(kind: str, ms: float = 0.0, fail_times: int = 0) -> str:
    """Behave as ``kind`` says (see the module doc); returns ``kind``.

    Args:
        kind: fast, slow, flaky, permanent, exhausted (expire jobs never run).
        ms: milliseconds of sleep for fast and slow jobs.
        fail_times: planned transient failures of a flaky job.

    Raises:
        SoakTransient: flaky (first attempts) and exhausted jobs.
        Permanent: permanent jobs.
    """
    record("start")
    try:
        if kind in ("fast", "slow"):
            time.sleep(ms / 1000)
        elif kind == "flaky":
            if context().attempt <= fail_times:
                raise SoakTransient("soak: planned transient failure")
        elif kind == "permanent":
            raise Permanent("soak: planned permanent failure")
        elif kind == "exhausted":
            raise SoakTransient("soak: fails on every attempt")
        else:
            raise Permanent(f"soak: a {kind!r} job must never run")
    finally:
        record("end")
    return kind


@dq.task(name=TIMEOUT_TASK, queue=QUEUE, max_attempts=MAX_ATTEMPTS, backoff=constant(BACKOFF),
         timeout=TIMEOUT)  # fmt: skip
def soak_timeout() -> str:
    """Attempt 1 sleeps :data:`OVERRUN` s (past the timeout); later attempts return."""
    record("start")
    if context().attempt == 1:
        time.sleep(OVERRUN)
    record("end")
    return "ok"


@dq.task(name=ATIMEOUT_TASK, queue=QUEUE, max_attempts=MAX_ATTEMPTS, backoff=constant(BACKOFF),
         timeout=TIMEOUT)  # fmt: skip
async def soak_atimeout() -> str:
    """The ``async`` twin of :func:`soak_timeout` (cancelled at the timeout)."""
    record("start")
    if context().attempt == 1:
        await asyncio.sleep(OVERRUN)
    record("end")
    return "ok"
