"""JSON encoding of payloads, results and meta, with the size limits applied at enqueue
(payloads) and when an attempt returns (results)."""

from __future__ import annotations

import json
import math
from typing import Any

from durq.errors import PayloadError, PayloadTooLarge

#: Default limit on a payload's JSON encoding, in bytes (1 MiB).
DEFAULT_PAYLOAD_LIMIT = 1 << 20

#: Default limit on a result's JSON encoding, in bytes (1 MiB, like the payload's). Set it
#: with ``Durq(result_limit=...)``; a larger result fails its job for good (its work was
#: done, but retrying would return the same result), so big outputs belong in a blob.
DEFAULT_RESULT_LIMIT = 1 << 20

#: Deepest nesting of lists and dicts accepted in a payload or meta. Python's own JSON
#: encoder gives up near its recursion limit (1000), at a depth that depends on the caller's
#: stack; a fixed bound well below it makes the rule the same everywhere, and every payload
#: accepted decodes again in a worker.
MAX_DEPTH = 500


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


def check_structure(value: Any, what: str = "payload") -> None:
    """Refuse what JSON would store as something else: a dict key that is not a ``str``
    at any depth (JSON turns ``1``, ``1.5``, ``True`` and ``None`` into text, so
    ``{1: "a"}`` would come back as ``{"1": "a"}`` and ``{1: "a", "1": "b"}`` would lose a
    value), and nesting deeper than :data:`MAX_DEPTH` levels. Tuples are allowed and come
    back as lists; other types are left to the encoder.

    Raises:
        PayloadError: a non-str key (the error names its path) or too deep a nesting.
    """
    # (value, depth, trail): the trail is a linked (key, parent trail) pair, turned into a
    # path only for the error message, so that a valid payload costs no string building
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, trail = stack.pop()
        if depth > MAX_DEPTH:
            raise PayloadError(
                f"{what} nests deeper than {MAX_DEPTH} levels (at {_path(what, trail)})"
            )
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise PayloadError(
                        f"{what} keys must be str at every level, not {type(key).__name__}: "
                        f"{key!r:.80} in {_path(what, trail)} (JSON would turn it into text)"
                    )
                if isinstance(sub, dict | list | tuple):
                    stack.append((sub, depth + 1, (key, trail)))
        elif isinstance(item, list | tuple):
            for index, sub in enumerate(item):
                if isinstance(sub, dict | list | tuple):
                    stack.append((sub, depth + 1, (index, trail)))


def _path(what: str, trail: Any) -> str:
    keys: list[Any] = []
    while trail is not None:
        key, trail = trail
        keys.append(key)
    text = what + "".join(f"[{k!r:.40}]" for k in reversed(keys))
    return text if len(text) <= 200 else text[:200] + "..."


def encode_payload(kwargs: dict[str, Any], limit: int | None) -> str:
    """Encode a task's keyword arguments (a dict with str keys at every level).

    Tuples come back as lists; everything else accepted comes back equal (``str`` with
    lone surrogates or NUL included, ``int`` of any size up to Python's 4300 digits,
    finite ``float``, ``bool``, ``None``).

    Raises:
        PayloadError: not a dict with str keys at every level, nested deeper than
            :data:`MAX_DEPTH`, or not JSON-serialisable.
        PayloadTooLarge: over ``limit`` bytes.
    """
    if not isinstance(kwargs, dict):
        raise PayloadError(
            f"payload must be a dict of keyword arguments, not {type(kwargs).__name__}"
        )
    if not kwargs:  # a task without arguments: nothing to check or encode
        return "{}" if limit is None or limit >= 2 else encode(kwargs, limit=limit)
    nested = False
    for key, value in kwargs.items():  # one pass over a flat payload: keys and nesting
        if not isinstance(key, str):
            raise PayloadError(f"payload keys must be str, not {type(key).__name__}: {key!r}")
        if not nested and isinstance(value, dict | list | tuple):
            nested = True
    if nested:
        check_structure(kwargs)
    try:
        return encode(kwargs, limit=limit)
    except PayloadTooLarge:
        raise
    except PayloadError as exc:
        for key, value in kwargs.items():  # name the key whose value cannot be JSON
            try:
                encode(value, limit=None)
            except PayloadError as inner:
                raise type(exc)(f"payload key {key!r}: {inner}") from None
        raise


def encode_result(value: Any, limit: int | None) -> str:
    """Encode a task's return value exactly, or refuse it.

    The same faithful-JSON rule as a payload (:func:`check_structure`): a dict key that
    is not a ``str`` at any depth is refused, since ``{1: "one", "1": "the string one"}``
    would be stored as ``{"1": "the string one"}`` and the caller would read back something
    else than the task returned. Tuples come back as lists.

    Args:
        value: the return value.
        limit: the largest encoding accepted, in bytes (``Durq(result_limit=)``); None for
            no limit.

    Raises:
        PayloadError: a non-str key (the message names its path, e.g. ``result[1]``), too
            deep a nesting, or a value JSON cannot hold (NaN, bytes, a set, an object).
        PayloadTooLarge: the encoding is over ``limit`` bytes.
    """
    if value is None and (limit is None or limit >= 4):  # most tasks return None
        return "null"
    check_structure(value, "result")
    return encode(value, what="result", limit=limit)


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
