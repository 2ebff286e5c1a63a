"""The records that cross durq's layers: jobs, outcomes, inserts, batches, steps, pauses,
alerts, limits, blobs and the status figures.

The lowest layer but :mod:`durq.errors`: nothing here imports any other part of durq, so
the store, the features, the app and the worker can all speak in these types. Each
submodule holds the records of one concern; this package re-exports them.
"""

from durq.model.alerts import Alert
from durq.model.batches import BatchRecord, NewBatch
from durq.model.blobs import BlobCollected, BlobRecord, BlobRelease, PutResult, RefResult
from durq.model.dashboard import (
    InHand,
    JobFilter,
    Series,
    WhyFacts,
    WorkerDetail,
    WorkerReport,
)
from durq.model.dependencies import Edge, Parent, ParentResult
from durq.model.inserts import Inserted, InsertedRows, NewJob
from durq.model.jobs import (
    HOOK_MAX_ATTEMPTS,
    HOOK_TASK_PREFIX,
    RETRYABLE_STATES,
    SNOOZE_KIND,
    TERMINAL_STATES,
    AttemptError,
    Claimed,
    JobRecord,
    JobState,
    Outcome,
    ReapSummary,
    RescueSummary,
    SweepSummary,
)
from durq.model.limits import JobLimit, LimitUsage
from durq.model.pauses import QueuePause
from durq.model.schedules import ScheduleDefinition, ScheduleRecord
from durq.model.status import StatusData, WorkerInfo
from durq.model.steps import StepRecord

__all__ = [
    "HOOK_MAX_ATTEMPTS",
    "HOOK_TASK_PREFIX",
    "RETRYABLE_STATES",
    "SNOOZE_KIND",
    "TERMINAL_STATES",
    "Alert",
    "AttemptError",
    "BatchRecord",
    "BlobCollected",
    "BlobRecord",
    "BlobRelease",
    "Claimed",
    "Edge",
    "InHand",
    "Inserted",
    "InsertedRows",
    "JobFilter",
    "JobLimit",
    "JobRecord",
    "JobState",
    "LimitUsage",
    "NewBatch",
    "NewJob",
    "Outcome",
    "Parent",
    "ParentResult",
    "PutResult",
    "QueuePause",
    "ReapSummary",
    "RefResult",
    "RescueSummary",
    "ScheduleDefinition",
    "ScheduleRecord",
    "Series",
    "StatusData",
    "StepRecord",
    "SweepSummary",
    "WhyFacts",
    "WorkerDetail",
    "WorkerInfo",
    "WorkerReport",
]
