"""The task that ``durq verify`` runs on real worker processes.

``durq verify`` starts ``durq worker durq.proving.verify_app:dq --db URL ...`` (:data:`APP`)
with the runs file and its own pid in the environment (:mod:`durq.proving.runs`). Each run
of :func:`verify_sleep` appends ``start`` before its work and ``end`` after it; importing
this module starts the parent watch, so a worker whose ``durq verify`` died stops itself.
"""

from __future__ import annotations

import time

from durq.app import Durq
from durq.proving.runs import record, start_parent_watch
from durq.task import Task

#: What ``durq verify``'s workers run (``MODULE:ATTR``).
APP = "durq.proving.verify_app:dq"
TASK_NAME = "durq-verify-sleep"
DEFAULT_QUEUE = "durq-verify"


def verify_sleep(ms: float) -> None:
    """Sleep ``ms`` milliseconds, recording the start and the end of this run.

    Args:
        ms: how long the job works, in milliseconds.
    """
    record("start")
    time.sleep(ms / 1000)
    record("end")


def register(app: Durq) -> Task[..., None]:
    """Register the verify task on ``app`` (the producer side uses its own app).

    Returns:
        The registered task (routing name :data:`TASK_NAME`).

    Raises:
        ConfigError: another function is already registered under :data:`TASK_NAME`.
    """
    return app.task(name=TASK_NAME, queue=DEFAULT_QUEUE)(verify_sleep)


#: The app :data:`APP` names; its URL comes from ``--db``/``DURQ_URL``.
dq = Durq()
register(dq)
start_parent_watch()
