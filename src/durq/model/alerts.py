"""One alert as handed to the ``on_alert`` hooks; see :mod:`durq.alerts`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert as handed to the ``on_alert`` hooks.

    Attributes:
        key: the cooldown key (e.g. ``pause:downloads``).
        message: the text given to :meth:`durq.Durq.alert`.
        severity: ``info``, ``warning``, ``error`` or ``critical``.
        at: when it was sent, seconds since the epoch on the store's clock (the database's
            clock on PostgreSQL).
        suppressed: how many raises of this key were counted, not sent, since the previous
            alert for it was sent (0 when none).
        first_at: the earliest raise this alert stands for: the first suppressed one when
            ``suppressed > 0``, else ``at``.
    """

    key: str
    message: str
    severity: str
    at: float
    suppressed: int = 0
    first_at: float = 0.0
