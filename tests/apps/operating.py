"""Tasks for the operating tests (logs, metrics, traces), run by real worker processes.

With ``SPANS_FILE`` set, an OpenTelemetry SDK with the in-memory exporter is installed at
import, and the finished spans are appended to that file as JSON lines at exit (by the worker
and by each process-pool child).
"""

from __future__ import annotations

import atexit
import json
import os

import durq

dq = durq.Durq()  # DURQ_URL

_spans_file = os.environ.get("SPANS_FILE")
if _spans_file:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def _dump() -> None:
        with open(_spans_file, "a", encoding="utf-8") as f:  # the worker and each pool child
            for s in exporter.get_finished_spans():
                f.write(json.dumps(span_dict(s)) + "\n")

    atexit.register(_dump)


def span_dict(s: object) -> dict[str, object]:
    """A finished SDK span as plain data (ids in hex)."""
    ctx = s.context  # type: ignore[attr-defined]
    parent = s.parent  # type: ignore[attr-defined]
    return {
        "name": s.name,  # type: ignore[attr-defined]
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent else None,
        "kind": str(s.kind),  # type: ignore[attr-defined]
        "status": str(s.status.status_code),  # type: ignore[attr-defined]
        "attributes": dict(s.attributes or {}),  # type: ignore[attr-defined]
        "events": [e.name for e in s.events],  # type: ignore[attr-defined]
    }


@dq.task(max_attempts=3)
def ok(n: int = 0) -> int:
    return n


@dq.task(max_attempts=1)
def boom(why: str = "") -> None:
    raise ValueError(f"boom: {why}")


@dq.task(max_attempts=2, backoff=durq.constant(0.05))
def flaky_traced() -> str:
    """Fails its first attempt, succeeds its second; opens a user span and enqueues ok."""
    from opentelemetry import trace

    with trace.get_tracer("user").start_as_current_span("user-work"):
        if durq.context().attempt == 1:
            raise durq.Transient("first attempt fails")
        ok.enqueue(n=7)
    return "done"
