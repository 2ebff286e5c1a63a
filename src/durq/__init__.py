"""durq: a durable job queue for Python. SQLite by default; no job is ever lost.

Quick start::

    import durq

    dq = durq.Durq("sqlite:///jobs.db")

    @dq.task(max_attempts=5, backoff=durq.exponential(base=2, cap=60))
    def fetch(url: str) -> int:
        ...

    job = fetch.enqueue(url="https://example.org")   # committed when this returns
    # elsewhere: durq worker myapp:dq
"""

from durq import blobs
from durq.app import Durq
from durq.context import JobContext, context
from durq.errors import (
    BlobError,
    BlobGone,
    BlobNotFound,
    ConfigError,
    DurqError,
    Interrupted,
    JobFailed,
    JobGone,
    JobNotFound,
    LeaseLost,
    LimitTimeout,
    PauseQueue,
    PayloadError,
    PayloadTooLarge,
    Permanent,
    SchemaTooNew,
    Snooze,
    SnoozeError,
    StepResultError,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
    TaskSignal,
    Transient,
    UnknownTask,
)
from durq.job import Job
from durq.model import AttemptError, JobState
from durq.model.alerts import Alert
from durq.model.pauses import QueuePause
from durq.retry import constant, exponential, tiers
from durq.task import Task
from durq.worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Alert",
    "AttemptError",
    "BlobError",
    "BlobGone",
    "BlobNotFound",
    "ConfigError",
    "Durq",
    "DurqError",
    "Interrupted",
    "Job",
    "JobContext",
    "JobFailed",
    "JobGone",
    "JobNotFound",
    "JobState",
    "LeaseLost",
    "LimitTimeout",
    "PauseQueue",
    "PayloadError",
    "PayloadTooLarge",
    "Permanent",
    "QueuePause",
    "SchemaTooNew",
    "Snooze",
    "SnoozeError",
    "StepResultError",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreReadOnly",
    "Task",
    "TaskSignal",
    "Transient",
    "UnknownTask",
    "Worker",
    "blobs",
    "constant",
    "context",
    "exponential",
    "tiers",
]

# -- batches --
from durq.batches import Batch, BatchStatus
from durq.errors import BatchNotFound

__all__ += ["Batch", "BatchNotFound", "BatchStatus"]
