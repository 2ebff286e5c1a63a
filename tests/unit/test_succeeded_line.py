"""The per-job ``job_succeeded`` line's own path (``events.emit_succeeded`` into the
buffered handler's ``put_succeeded``): the same line, to the byte, as every other event's
path writes for the same fields, in both formats, whatever the names hold."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durq.observability import events, logs

NAMES = st.text(min_size=1, max_size=40)


@given(
    ts=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    job_id=st.integers(min_value=1, max_value=2**63 - 1),
    queue=NAMES,
    task=NAMES,
    attempt=st.integers(min_value=1, max_value=1_000_000),
    worker_id=NAMES,
    duration=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_the_json_line_is_the_general_lines_to_the_byte(
    ts: float, job_id: int, queue: str, task: str, attempt: int, worker_id: str, duration: float
) -> None:
    fields = events.succeeded_fields(job_id, queue, task, attempt, worker_id, duration)
    general = logs.json_event(ts, logging.INFO, events.JOB_SUCCEEDED, fields)
    fast = logs.json_succeeded(ts, job_id, queue, task, attempt, worker_id, duration)
    assert fast == general
    if not any("\ud800" <= c <= "\udfff" for c in queue + task + worker_id):  # parses back
        parsed = json.loads(fast)
        assert (parsed["event"], parsed["id"], parsed["queue"]) == ("job_succeeded", job_id, queue)
        assert (parsed["task"], parsed["worker_id"], parsed["duration"]) == (
            task,
            worker_id,
            duration,
        )


@pytest.fixture
def configured() -> Iterator[tuple[io.StringIO, list[logging.Handler]]]:
    stream = io.StringIO()
    handlers: list[logging.Handler] = []
    yield stream, handlers
    for handler in handlers:
        for name in ("durq", "psycopg"):
            lg = logging.getLogger(name)
            lg.removeHandler(handler)
            lg.propagate = True
        handler.close()
    events.set_sink(None)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_worker_configuration_writes_it_as_the_general_path_would(
    configured: tuple[io.StringIO, list[logging.Handler]], fmt: str
) -> None:
    stream, handlers = configured
    handlers.append(logs.configure(fmt, logging.INFO, stream))
    names = ('q "100%"', "task\\n%s", "host:1:ab")
    events.emit_succeeded(7, *names[:2], 2, names[2], 0.25)
    events.emit_fields(
        events.JOB_SUCCEEDED,
        logging.INFO,
        events.succeeded_fields(7, *names[:2], 2, names[2], 0.25),
    )
    events.flush()
    fast, general = stream.getvalue().splitlines()

    def cut(line: str) -> str:  # all but the moment each was written
        if fmt == "text":
            return line[12:]
        return re.sub(r'"ts": [0-9.]+', "", re.sub(r'"time": "[^"]*"', "", line))

    assert cut(fast) == cut(general)
    if fmt == "json":
        assert json.loads(fast)["queue"] == names[0] and json.loads(fast)["task"] == names[1]
    else:
        assert "job_succeeded" in fast and "#7" in fast and "0.250s" in fast


def test_without_the_workers_sink_it_is_a_record_of_the_events_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events.set_sink(None)
    with caplog.at_level(logging.INFO, logger="durq.events"):
        events.emit_succeeded(3, "default", "send", 1, "w1", 0.5)
    [record] = [r for r in caplog.records if getattr(r, "durq_event", None)]
    assert record.durq_event == events.JOB_SUCCEEDED  # type: ignore[attr-defined]
    assert record.durq_fields == {  # type: ignore[attr-defined]
        "id": 3, "queue": "default", "task": "send", "attempt": 1, "worker_id": "w1",
        "duration": 0.5,
    }  # fmt: skip
