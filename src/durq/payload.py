"""JSON encoding of payloads, results and meta, with the size limit applied at enqueue."""

from __future__ import annotations

import json
import math
from typing import Any

from durq.errors import PayloadError, PayloadTooLarge

#: Default limit on a payload's JSON encoding, in bytes (1 MiB).
DEFAULT_PAYLOAD_LIMIT = 1 << 20


class UndecodablePayload(Exception):
    """A stored payload that is not a JSON object (corrupt row, foreign writer)."""


def _reject_nan(value: str) -> Any:
    raise ValueError(f"{value} is not valid JSON")


# One encoder and one decoder for the process: json.dumps/loads with options build new ones
# on every call, which shows on the worker's hot path.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_nan)


def encode(value: Any, *, what: str = "payload", limit: int | None = DEFAULT_PAYLOAD_LIMIT) -> str:
    """Encode ``value`` as compact JSON.

    Non-ASCII text is escaped, so lone surrogates survive the round trip.

    Args:
        value: any JSON-serialisable value (dicts with str keys, lists, str, int, float, bool,
            None). NaN and infinities are refused: they are not JSON.
        what: the name used in error messages ("payload", "result", "meta").
        limit: the largest encoding accepted, in bytes; ``None`` for no limit.

    Raises:
        PayloadError: (a ``TypeError``) the value is not JSON-serialisable, or holds NaN or
            infinity, or nests too deeply.
        PayloadTooLarge: (a ``TypeError`` and ``ValueError``) the encoding exceeds ``limit``.
    """
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PayloadError(f"{what} is not JSON-serialisable: {exc}") from None
    if limit is not None and len(text) > limit:
        raise PayloadTooLarge(
            f"{what} is {len(text)} bytes as JSON, over the limit of {limit} bytes"
        )
    return text


def encode_payload(kwargs: dict[str, Any], limit: int | None) -> str:
    """Encode a task's keyword arguments (a dict with str keys).

    Raises:
        PayloadError: not a dict with str keys, or not JSON-serialisable.
        PayloadTooLarge: over ``limit`` bytes.
    """
    if not isinstance(kwargs, dict):
        raise PayloadError(
            f"payload must be a dict of keyword arguments, not {type(kwargs).__name__}"
        )
    for key in kwargs:
        if not isinstance(key, str):
            raise PayloadError(f"payload keys must be str, not {type(key).__name__}: {key!r}")
    return encode(kwargs, limit=limit)


def decode_payload(text: str) -> dict[str, Any]:
    """Decode a stored payload.

    Raises:
        UndecodablePayload: the text is not JSON, or not a JSON object.
    """
    try:
        value = _STRICT_DECODER.decode(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UndecodablePayload(f"stored payload is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UndecodablePayload(f"stored payload is a JSON {type(value).__name__}, not an object")
    return value


def decode(text: str | None) -> Any:
    """Decode a stored JSON column (result, progress, meta); ``None`` stays ``None``.

    A column that does not decode is returned as its raw text rather than raising:
    reading a job must never fail because one column was damaged.
    """
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def is_finite_fraction(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0
