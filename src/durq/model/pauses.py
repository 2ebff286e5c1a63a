"""A queue's pause as stored; see :mod:`durq.pause`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueuePause:
    """A queue's pause as stored.

    Attributes:
        queue: the queue's name.
        reason: the text given when it was paused.
        source: who paused it: ``admin`` (the default of :meth:`durq.Durq.pause` and of
            ``durq pause``), ``auto`` (a task raised :class:`durq.PauseQueue`), or any
            name an app chose (e.g. ``env``).
        paused_at: when, seconds since the epoch on the store's clock.
    """

    queue: str
    reason: str
    source: str
    paused_at: float
