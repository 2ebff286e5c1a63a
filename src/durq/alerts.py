"""Alerts: ``@dq.on_alert`` hooks behind a cooldown kept in the database.

``dq.alert(key, message)`` records the alert in the store in one statement (an upsert on
the ``alerts`` table): a key raised again within its cooldown is counted, not sent, also
across processes and restarts, and the next alert sent for that key says how many were
suppressed. Hooks run in the calling process after that commit; a hook that raises is
logged and never breaks the caller.

This module holds the data and the delivery; the store holds the cooldown.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

from durq.errors import ConfigError
from durq.model.alerts import Alert
from durq.observability import events

log = logging.getLogger("durq.alerts")

#: Default cooldown of an alert key, in seconds (10 minutes, as issue 4 asks).
DEFAULT_COOLDOWN = 600.0

SEVERITIES = ("info", "warning", "error", "critical")

ALERT_SENT = "alert_sent"
ALERT_SUPPRESSED = "alert_suppressed"
ALERT_HOOK_FAILED = "alert_hook_failed"


AlertHook = Callable[[Alert], object]


class AlertHooks:
    """The hooks registered on one app; thread-safe to register and to deliver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[AlertHook] = []

    def add(self, fn: AlertHook) -> None:
        if not callable(fn):
            raise ConfigError(f"an alert hook must be callable, not {fn!r}")
        with self._lock:
            if fn not in self._hooks:
                self._hooks.append(fn)

    def __len__(self) -> int:
        with self._lock:
            return len(self._hooks)

    def deliver(self, alert: Alert) -> int:
        """Call every hook with ``alert``, in registration order; returns how many returned
        without raising. A hook that raises is logged (``alert_hook_failed``) and the next
        one still runs."""
        with self._lock:
            hooks = list(self._hooks)
        ok = 0
        for hook in hooks:
            try:
                hook(alert)
                ok += 1
            except Exception as exc:
                log.warning("alert hook %r failed for %s", hook, alert.key, exc_info=True)
                events.emit(
                    ALERT_HOOK_FAILED,
                    logging.WARNING,
                    key=alert.key,
                    hook=getattr(hook, "__qualname__", repr(hook)),
                    error=f"{type(exc).__name__}: {exc}",
                )
        return ok


def check_alert_args(key: str, message: str, severity: str, cooldown: float) -> None:
    """Validate :meth:`durq.Durq.alert` arguments.

    Raises:
        ConfigError: an empty or over-long key (1..200 characters), a message that is not a
            str, an unknown severity, or a cooldown that is not a finite number >= 0.
    """
    if not isinstance(key, str) or not key or len(key) > 200:
        raise ConfigError(f"alert key must be a non-empty str of at most 200 characters: {key!r}")
    if not isinstance(message, str):
        raise ConfigError(f"alert message must be a str, not {type(message).__name__}")
    if severity not in SEVERITIES:
        raise ConfigError(f"alert severity must be one of {SEVERITIES}, not {severity!r}")
    if (
        not isinstance(cooldown, int | float)
        or isinstance(cooldown, bool)
        or not math.isfinite(cooldown)
        or cooldown < 0
    ):
        raise ConfigError(f"cooldown must be a number of seconds >= 0, not {cooldown!r}")
