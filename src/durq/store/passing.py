"""The parents' results written into a child's payload when it is queued (``dq.chain``,
``dq.group(...).then``, ``after=`` with ``pass_as``): the one rule both backends apply, in
the transaction that made the child's last parent terminal (docs/features/dependencies.md).

A child whose payload with its parents' results would be over the app's ``payload_limit``
(bytes of JSON, as at enqueue), or over :data:`STORED_CAP` characters as stored, is not
queued: the store fails it (kind ``unstorable_payload``) so that the parent's finish, and
every other outcome of its transaction, still commits. Without a codec the store sums the
results' sizes in SQL first and does not read results that cannot fit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from durq.codecs import Codec, decode_with, encode_with
from durq.model.dependencies import UNSTORABLE_PAYLOAD_KIND
from durq.payload import encode

#: The most characters a payload with its parents' results may take as stored, whatever
#: ``payload_limit`` says (also with ``payload_limit=None``): 512 MiB, half of the largest
#: value either database stores (SQLite's SQLITE_MAX_LENGTH and PostgreSQL's text are
#: about 1 GB), so the write itself never fails.
STORED_CAP = 512 * 1024 * 1024

#: The (type, kind) of the error entry of a child failed because its payload with its
#: parents' results could not be stored (over the limit, or a NUL character on PostgreSQL).
UNSTORABLE = ("UnstorablePayload", UNSTORABLE_PAYLOAD_KIND)

_WHAT = "its payload with its parents' results"


def over_limit(child: int, size: int, limit: int, *, at_least: bool = False) -> str:
    """The message of a child whose payload with its parents' results is ``size`` bytes of
    JSON (``at_least``: that much or more), over ``limit``."""
    amount = f"at least {size}" if at_least else str(size)
    return (
        f"job {child}: {_WHAT} is {amount} bytes as JSON, over the payload_limit of {limit} "
        "bytes; not run"
    )


def too_large_early(
    child: int, results_size: int, codec: Codec | None, limit: int | None
) -> str | None:
    """Why ``child`` cannot take its parents' results when their stored texts add up to
    ``results_size`` characters, before they are read; None when reading them must decide.

    Only without a codec: the payload then holds each result's text as stored."""
    if codec is not None:
        return None
    bound = STORED_CAP if limit is None else min(limit, STORED_CAP)
    if results_size <= bound:
        return None
    if limit is not None and limit <= STORED_CAP:
        return over_limit(child, results_size, limit, at_least=True)
    return (
        f"job {child}: {_WHAT} is at least {results_size} characters as stored, over the "
        f"{STORED_CAP} a stored payload may take; not run"
    )


def merge(
    child: int,
    own: str,
    passed: Iterable[tuple[str, bool, str | None]],
    codec: Codec | None,
    limit: int | None,
) -> tuple[str | None, str | None]:
    """The new stored payload of ``child`` (its own stored payload ``own`` with the
    results written into the arguments ``passed`` names: (argument, as a list, the
    parent's stored result), in parent id order), or why it cannot be stored.

    Returns:
        (stored text, None), or (None, the message) when the payload's JSON is over
        ``limit`` bytes or its stored text over :data:`STORED_CAP` characters.

    Raises:
        UndecodableValue: a value is encrypted and ``codec`` cannot read it.
    """
    args: dict[str, Any] = {}
    for name, as_list, text in passed:
        value = None if text is None else json.loads(decode_with(codec, text))
        if as_list:
            args.setdefault(name, []).append(value)
        else:
            args[name] = value
    body = json.loads(decode_with(codec, own))
    body.update(args)
    text = encode(body, limit=None)
    if limit is not None and len(text) > limit:
        return None, over_limit(child, len(text), limit)
    stored = encode_with(codec, text)
    if len(stored) > STORED_CAP:
        return None, (
            f"job {child}: {_WHAT} is {len(stored)} characters as stored, over the "
            f"{STORED_CAP} a stored payload may take; not run"
        )
    return stored, None
