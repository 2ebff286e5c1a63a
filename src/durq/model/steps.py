"""The record of one step of a job (``ctx.step``); see :mod:`durq.steps`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One recorded step of a job.

    Attributes:
        name: the step's name (unique per job).
        result: its result as stored (JSON text).
        attempt: the attempt number that recorded it.
        created_at: when it was recorded, seconds since the epoch (store clock).
    """

    name: str
    result: str
    attempt: int
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "result": _decoded(self.result),
            "attempt": self.attempt,
            "created_at": self.created_at,
        }


def _decoded(text: str) -> Any:
    """A stored JSON column as a value, or its raw text when it does not decode (reading a
    job must never fail because one column was damaged; :func:`durq.payload.decode` does
    the same for the other columns)."""
    try:
        return json.loads(text)
    except ValueError:
        return text
