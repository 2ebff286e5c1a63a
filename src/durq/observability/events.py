"""Structured event logs: one JSON object per line with a leading ``event`` field (DESIGN §7).

Events go to the ``durq.events`` logger at INFO (failures at WARNING/ERROR), so the host
application decides where they land. :func:`configure_json_logging` sends them to a stream
as JSON lines, which is what ``durq worker`` does.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

logger = logging.getLogger("durq.events")

JOB_ENQUEUED = "job_enqueued"
JOB_STARTED = "job_started"
JOB_SUCCEEDED = "job_succeeded"
JOB_RETRY_SCHEDULED = "job_retry_scheduled"
JOB_SNOOZED = "job_snoozed"
JOB_FAILED = "job_failed"
JOB_RELEASED = "job_released"
JOB_UNDECODABLE = "job_undecodable"
STALE_OUTCOME = "stale_outcome"
LEASE_LOST = "lease_lost"
LEASES_RECOVERED = "leases_recovered"
WORKER_STARTED = "worker_started"
WORKER_STOPPING = "worker_stopping"
WORKER_STOPPED = "worker_stopped"
WORKER_CRASHED = "worker_crashed"
STORE_BUSY = "store_busy"
JOB_INTERRUPTED = "job_interrupted"  # the worker stops a body: timeout, cancelled, expired
JOB_WEDGED = "job_wedged"  # an interrupted body has not stopped: its slot stays taken
LOOP_BLOCKED = "loop_blocked"  # the async event loop ran no callback past the threshold
LOOP_UNBLOCKED = "loop_unblocked"  # ... and runs again (with how long it was blocked)


def enabled(level: int = logging.INFO) -> bool:
    """Cheap check for hot paths: is anybody listening at this level?"""
    return logger.isEnabledFor(level)


class _EventMessage:
    """An event's log message: ``event key=value ...``, built only if a handler formats it.

    Without it, an app that configured no logging saw bare event names on stderr
    (``alert_sent``) from Python's last-resort handler, with none of the fields.
    """

    __slots__ = ("event", "fields")

    def __init__(self, event: str, fields: dict[str, Any]) -> None:
        self.event = event
        self.fields = fields

    def __str__(self) -> str:
        parts = [self.event]
        parts.extend(
            f"{k}={json.dumps(v, default=repr, ensure_ascii=False)}" for k, v in self.fields.items()
        )
        return " ".join(parts)


#: (time, level, event, fields) -> None: where events go instead of a LogRecord when the
#: process's log set-up owns the ``durq`` logger (``durq worker``: durq.observability.logs).
Sink = Callable[[float, int, str, dict[str, Any]], None]
#: (time, job id, queue, task, attempt, worker id, duration) -> None: the sink's own path
#: for the one line every job writes at INFO (:func:`emit_succeeded`).
SucceededSink = Callable[[float, int, str, str, int, str, float], None]
_sink: Sink | None = None
_flush: Callable[[], None] | None = None
_succeeded: SucceededSink | None = None


def set_sink(
    sink: Sink | None,
    flush: Callable[[], None] | None = None,
    succeeded: SucceededSink | None = None,
) -> None:
    """Hand events straight to ``sink`` (None: back to the ``durq.events`` logger), and
    :func:`flush` to ``flush``, and the ``job_succeeded`` lines of :func:`emit_succeeded`
    to ``succeeded`` (None: through ``sink``). Only a set-up that is the logger's one
    handler may do this: records then skip Python's logging machinery (about 5 µs an
    event), which is what makes per-job events cheap."""
    global _sink, _flush, _succeeded
    _sink, _flush = sink, flush
    _succeeded = succeeded if sink is not None else None


def flush() -> None:
    """Write what the sink holds (the worker's claimer calls it after each batch's events,
    so a line is out within microseconds of its commit). No-op without a sink."""
    if _flush is not None:
        _flush()


def emit(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event. ``fields`` must be JSON-serialisable (others are shown with repr)."""
    if logger.isEnabledFor(level):
        emit_fields(event, level, fields)


def emit_fields(event: str, level: int, fields: dict[str, Any]) -> None:
    """:func:`emit` for a caller that holds the fields as a dict already and has checked
    :func:`enabled` for ``level`` (the worker's per-job line: no keyword packing, no second
    level check). ``fields`` is kept, not copied: do not change it afterwards."""
    sink = _sink
    if sink is not None:
        sink(time.time(), level, event, fields)
        return
    logger.log(
        level, _EventMessage(event, fields), extra={"durq_event": event, "durq_fields": fields}
    )


def emit_succeeded(
    job_id: int, queue: str, task: str, attempt: int, worker_id: str, duration: float
) -> None:
    """The worker's ``job_succeeded`` line (INFO), with the fields ``id``, ``queue``,
    ``task``, ``attempt``, ``worker_id`` and ``duration`` (seconds), in that order. The
    caller has checked :func:`enabled`. Every job writes one, so a sink that takes them
    whole (``set_sink(..., succeeded=)``) gets the values without a dict; elsewhere it is
    :func:`emit_fields` of the same fields."""
    fast = _succeeded
    if fast is not None:
        fast(time.time(), job_id, queue, task, attempt, worker_id, duration)
        return
    emit_fields(
        JOB_SUCCEEDED,
        logging.INFO,
        succeeded_fields(job_id, queue, task, attempt, worker_id, duration),
    )


def succeeded_fields(
    job_id: int, queue: str, task: str, attempt: int, worker_id: str, duration: float
) -> dict[str, Any]:
    """The fields of a ``job_succeeded`` line, in their order."""
    return {
        "id": job_id,
        "queue": queue,
        "task": task,
        "attempt": attempt,
        "worker_id": worker_id,
        "duration": duration,
    }


class JsonLinesFormatter(logging.Formatter):
    """Formats durq events (and any other record) as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "durq_event", None)
        body: dict[str, Any] = {"event": event or "log"}
        body["ts"] = round(record.created, 6)
        body["level"] = record.levelname.lower()
        fields = getattr(record, "durq_fields", None)
        if fields:
            body.update(fields)
        elif event is None:
            body["logger"] = record.name
            body["message"] = record.getMessage()
        if record.exc_info:
            body["traceback"] = self.formatException(record.exc_info)
        return json.dumps(body, default=repr, ensure_ascii=False)


def configure_json_logging(stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send durq's logs to ``stream`` (default stderr) as JSON lines. Idempotent."""
    set_sink(None)
    root = logging.getLogger("durq")
    for handler in list(root.handlers):
        if getattr(handler, "_durq_json", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    handler._durq_json = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
