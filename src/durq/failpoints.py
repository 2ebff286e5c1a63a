"""Named failpoints for crash testing, inert unless ``DURQ_FAILPOINTS`` names them.

``DURQ_FAILPOINTS="after_claim=exit,heartbeat=raise,finish=sleep:2"`` arms points by name;
each action is ``exit`` (``os._exit(137)``, like a SIGKILL), ``raise`` (raises
:class:`FailpointError`) or ``sleep:<seconds>``. An optional ``@<n>`` fires only on the
n-th hit (``after_claim=exit@3``). Read once at import: when the variable is unset,
:func:`hit` is a dictionary lookup on an empty dict.

Blob store points (durq.blobs): ``blob_written`` (a put's temp file is written and fsynced,
not yet in place), ``blob_recorded`` (the bytes are in place under their key, about to be
recorded in the database), ``blob_released`` (a release won in the database, the bytes not
yet deleted).
"""

from __future__ import annotations

import os
import time

from durq.errors import DurqError


class FailpointError(DurqError):
    """Raised by a failpoint armed with ``raise``."""


def _parse(spec: str) -> dict[str, tuple[str, float, int]]:
    armed: dict[str, tuple[str, float, int]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, action = part.partition("=")
        action, _, nth = (action or "raise").partition("@")
        kind, _, arg = action.partition(":")
        armed[name.strip()] = (kind, float(arg or 0), int(nth or 0))
    return armed


_ARMED = _parse(os.environ.get("DURQ_FAILPOINTS", ""))
_HITS: dict[str, int] = {}


def hit(name: str) -> None:
    """Pass through the failpoint ``name``: nothing happens unless it is armed."""
    if not _ARMED:
        return
    armed = _ARMED.get(name)
    if armed is None:
        return
    kind, arg, nth = armed
    count = _HITS.get(name, 0) + 1
    _HITS[name] = count
    if nth and count != nth:
        return
    if kind == "exit":
        os._exit(137)
    elif kind == "sleep":
        time.sleep(arg)
    else:
        raise FailpointError(f"failpoint {name} fired")
