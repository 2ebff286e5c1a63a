"""Payload encoding, the JSON-lines event format, failpoint parsing, the status snapshot."""

from __future__ import annotations

import io
import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durq.errors import PayloadError, PayloadTooLarge
from durq.failpoints import _parse
from durq.model import StatusData, WorkerInfo
from durq.observability import events
from durq.observability.status import snapshot
from durq.payload import UndecodablePayload, decode, decode_payload, encode, encode_payload

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(st.dictionaries(st.text(), json_values, max_size=8))
def test_any_json_payload_round_trips(payload: dict[str, object]) -> None:
    assert decode_payload(encode_payload(payload, limit=None)) == payload


def test_encode_errors_are_type_errors_naming_the_field() -> None:
    with pytest.raises(PayloadError, match="result is not JSON-serialisable"):
        encode({"x": object()}, what="result")
    with pytest.raises(PayloadTooLarge) as info:
        encode("x" * 20, limit=10)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    with pytest.raises(PayloadError, match="dict of keyword arguments"):
        encode_payload([1, 2], limit=None)  # type: ignore[arg-type]
    deep: list[object] = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    with pytest.raises(PayloadError):
        encode(deep)


@pytest.mark.parametrize("stored", ["{oops", "[1, 2]", '"text"', "NaN", '{"x": NaN}'])
def test_undecodable_stored_payloads(stored: str) -> None:
    with pytest.raises(UndecodablePayload):
        decode_payload(stored)


def test_decode_keeps_a_damaged_column_readable() -> None:
    assert decode(None) is None
    assert decode('{"a": 1}') == {"a": 1}
    assert decode("{damaged") == "{damaged"


def test_events_are_json_lines_with_event_first() -> None:
    stream = io.StringIO()
    events.configure_json_logging(stream)
    try:
        events.emit(events.JOB_FAILED, logging.ERROR, id=7, error="boom")
        logging.getLogger("durq.worker").warning("plain %s", "message")
    finally:
        logging.getLogger("durq").handlers.clear()
        logging.getLogger("durq").propagate = True
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert next(iter(first)) == "event"
    assert first["event"] == "job_failed" and first["id"] == 7 and first["level"] == "error"
    assert second["event"] == "log" and second["message"] == "plain message"


def test_failpoint_specs_parse() -> None:
    assert _parse("a=exit, b=sleep:0.5@3,c") == {
        "a": ("exit", 0.0, 0),
        "b": ("sleep", 0.5, 3),
        "c": ("raise", 0.0, 0),
    }
    assert _parse("") == {}


def test_status_snapshot_derives_scheduled_backoff_and_stranded() -> None:
    now = 1000.0
    data = StatusData(
        now=now,
        counts={
            ("mail", "queued", 0, 0): 3,
            ("mail", "queued", 1, 1): 2,  # retries waiting: scheduled, in backoff
            ("mail", "queued", 1, 0): 1,  # delayed: scheduled, not in backoff
            ("mail", "failed", 0, 1): 4,
        },
        oldest_ready={"mail": 940.0},
        queued_tasks=[("mail", "send", 5), ("mail", "resize", 1)],
        workers=[
            WorkerInfo("w1", "h", 1, ("mail",), ("send",), 0.0, 990.0, 30.0),
            WorkerInfo("dead", "h", 2, ("mail",), ("resize",), 0.0, 100.0, 30.0),
        ],
    )
    snap = snapshot(data)
    mail = snap["queues"]["mail"]
    assert mail["counts"]["queued"] == 3 and mail["counts"]["scheduled"] == 3
    assert mail["in_backoff"] == 2 and mail["counts"]["failed"] == 4
    assert mail["oldest_queued_age"] == 60.0
    assert snap["stranded"] == [{"queue": "mail", "task": "resize", "jobs": 1}]
    assert [w["id"] for w in snap["workers"]] == ["w1"]
