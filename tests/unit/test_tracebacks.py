"""durq.worker.tracebacks: which frames a stored traceback keeps (issue ux-polish)."""

from __future__ import annotations

import traceback

import pytest

from durq.payload import UndecodablePayload, decode_payload
from durq.worker.tracebacks import format_task_error, is_durq_frame


def _frames(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith('File "')]


def test_an_error_of_durq_alone_keeps_every_frame() -> None:
    """Every frame is durq's (here: the test's own frame cut off): nothing is dropped."""
    with pytest.raises(UndecodablePayload) as info:
        decode_payload("{not json")
    exc = info.value
    assert exc.__traceback__ is not None
    exc = exc.with_traceback(exc.__traceback__.tb_next)  # only durq's frames left
    text = format_task_error(exc)
    assert text == "".join(traceback.format_exception(exc))
    assert _frames(text) and all("/durq/" in f for f in _frames(text))


def test_durq_frames_the_task_called_into_are_kept() -> None:
    """Only the leading frames go: durq code the task itself called stays in."""
    with pytest.raises(UndecodablePayload) as info:
        decode_payload("{not json")
    text = format_task_error(info.value)
    found = _frames(text)
    assert __file__ in found[0]
    assert any("/durq/payload.py" in f for f in found[1:])
    assert text == "".join(traceback.format_exception(info.value))


def test_is_durq_frame() -> None:
    import durq.payload

    assert is_durq_frame(durq.payload.__file__)
    assert not is_durq_frame(__file__)
