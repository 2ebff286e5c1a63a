"""OpenTelemetry traces (extra ``durq[otel]``): a span for each enqueue and each attempt,
the trace context carried in the job so the attempt's span is a child of the enqueue's.

Off until :func:`enable` (``durq worker --otel`` calls it in the worker; a producer calls
it once at start-up). When on:

- each ``enqueue`` runs in a PRODUCER span ``send <queue>`` and stores the W3C trace
  context (``traceparent``, ``tracestate``) in the job's meta under :data:`TRACE_KEY`;
- each attempt runs in a CONSUMER span ``process <queue>`` whose parent is that context
  (read from the job's row: one extra read per attempt, only with tracing on). Spans the
  task opens nest under it, and jobs it enqueues share the trace. A failed attempt's span
  has ERROR status and an ``exception`` event with the stored traceback.

Attributes follow OpenTelemetry's messaging semantic conventions: ``messaging.system``
(``durq``), ``messaging.operation.type`` (``send`` / ``process``),
``messaging.operation.name``, ``messaging.destination.name`` (the queue),
``messaging.message.id`` (the job id); plus ``durq.task`` and ``durq.attempt``. Payloads
are never recorded. Spans go wherever the application's TracerProvider sends them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from durq.errors import ConfigError
from durq.model import Claimed, Outcome

#: The key of the job's meta that carries the trace context.
TRACE_KEY = "durq.trace"
SYSTEM = "durq"

_state: dict[str, Any] = {"on": False}


def enable() -> None:
    """Turn tracing on in this process.

    Raises:
        ConfigError: opentelemetry-api is not installed (``pip install 'durq[otel]'``).
    """
    try:
        from opentelemetry import propagate, trace
    except ImportError as exc:
        raise ConfigError(f"tracing needs OpenTelemetry: pip install 'durq[otel]' ({exc})") from exc
    _state.update(on=True, trace=trace, propagate=propagate)


#: The event ``durq worker --otel`` logs (WARNING) when no TracerProvider is set up in the
#: worker's process: OpenTelemetry's default provider records nothing.
WITHOUT_PROVIDER = "tracing_without_provider"


def has_provider() -> bool:
    """Whether this process has set up a TracerProvider (OpenTelemetry's default, a proxy
    or no-op provider, records nothing). False when tracing was not enabled."""
    if not _state["on"]:
        return False
    trace = _state["trace"]
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def disable() -> None:
    _state["on"] = False


def enabled() -> bool:
    return bool(_state["on"])


def _tracer() -> Any:
    return _state["trace"].get_tracer("durq")


@contextlib.contextmanager
def send_span(queue: str, task: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """The enqueue's span and the carrier (the context to store in the job's meta)."""
    trace = _state["trace"]
    with _tracer().start_as_current_span(
        f"send {queue}",
        kind=trace.SpanKind.PRODUCER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue",
            "messaging.destination.name": queue,
            "durq.task": task,
        },
    ) as span:
        carrier: dict[str, str] = {}
        _state["propagate"].inject(carrier)
        yield span, carrier


def with_context(meta: Any, carrier: dict[str, str]) -> dict[str, Any]:
    """``meta`` (a mapping or None) with the trace context added under :data:`TRACE_KEY`."""
    out = dict(meta or {})
    out[TRACE_KEY] = carrier
    return out


def _parent(meta_json: str | None) -> Any:
    try:
        meta = json.loads(meta_json) if meta_json else None
    except ValueError:
        meta = None
    carrier = meta.get(TRACE_KEY) if isinstance(meta, dict) else None
    if not isinstance(carrier, dict):
        return None
    return _state["propagate"].extract({str(k): str(v) for k, v in carrier.items()})


@contextlib.contextmanager
def process_span(job: Claimed, meta_json: str | None) -> Iterator[Any]:
    """The attempt's span, a child of the context stored at enqueue (if any)."""
    trace = _state["trace"]
    with _tracer().start_as_current_span(
        f"process {job.queue}",
        context=_parent(meta_json),
        kind=trace.SpanKind.CONSUMER,
        record_exception=False,
        set_status_on_exception=True,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "durq.task": job.task,
            "durq.attempt": job.attempt,
        },
    ) as span:
        yield span


def record_outcome(span: Any, outcome: Outcome) -> None:
    """Mark a failed attempt's span: ERROR status and an ``exception`` event."""
    if outcome.kind == "succeeded":
        return
    err = outcome.error
    trace = _state["trace"]
    message = f"{err.type}: {err.message}" if err else outcome.kind
    if err is not None:
        span.add_event(
            "exception",
            {
                "exception.type": err.type,
                "exception.message": err.message,
                "exception.stacktrace": err.traceback,
            },
        )
    span.set_attribute("durq.outcome", outcome.kind)
    span.set_status(trace.Status(trace.StatusCode.ERROR, message))
