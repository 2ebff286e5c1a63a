"""Plain data for limits, shared by the facade and both backends (no SQL here)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: The longest rate period accepted (an hour, in seconds); start records older than this
#: can never count again and are pruned by the limited claim.
MAX_RATE_PERIOD = 3600.0


@dataclass(frozen=True, slots=True)
class JobLimit:
    """The limit a job is claimed under, computed at enqueue and stored on its row.

    Attributes:
        key: the limit's name; every job and hold with the same key shares its slots.
        concurrency: at most this many jobs of the key running (plus live holds), or None.
        rate: at most this many starts of the key in any ``per`` seconds, or None.
        per: the rate's period in seconds (1, 60 or 3600), or None without a rate.
    """

    key: str
    concurrency: int | None = None
    rate: int | None = None
    per: float | None = None


@dataclass(frozen=True, slots=True)
class LimitUsage:
    """One limit key as the store sees it now (for ``durq limits`` and tests).

    Attributes:
        name: the key.
        running: jobs of the key in state ``running`` (each holds one slot).
        held: live holds (``Durq.limit``) on the key, leases not expired.
        queued: jobs of the key waiting in ``queued`` (ready or scheduled).
        concurrency: the largest concurrency stored on its running or queued jobs, or None.
    """

    name: str
    running: int
    held: int
    queued: int
    concurrency: int | None


def lock_id(key: str) -> int:
    """A stable signed 32-bit number for ``key`` (PostgreSQL advisory lock, second half).

    sha256 rather than Python's ``hash()`` so that every process computes the same one.
    """
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big", signed=True)
