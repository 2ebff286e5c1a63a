"""PauseFacade: queue pauses and alerts (``dq.pause``, ``dq.resume``, ``dq.alert`` ...)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from durq.alerts import (
    ALERT_SENT,
    ALERT_SUPPRESSED,
    DEFAULT_COOLDOWN,
    AlertHooks,
    check_alert_args,
)
from durq.checks import _check_name
from durq.errors import ConfigError
from durq.facade.base import FacadeBase
from durq.model import Alert
from durq.model.pauses import QueuePause
from durq.observability import events

F = TypeVar("F", bound=Callable[..., Any])


class PauseFacade(FacadeBase):
    """Queue pauses and alerts: a mixin of :class:`durq.Durq`."""

    def pause(self, queue: str, reason: str, source: str = "admin") -> bool:
        """Pause ``queue``: workers claim nothing more from it until it is resumed; jobs
        already running finish. Enqueues still go in. Persisted in the database, so every
        worker and every restart sees it.

        The first pause wins: pausing a queue that is paused already changes nothing (its
        reason and source stay) and returns False. A claim that had already started when the
        pause committed may still take jobs (each claim reads the pause in its own statement).

        Args:
            queue: the queue's name.
            reason: why (shown by ``durq status``).
            source: who pauses: ``admin`` (default), ``auto`` is used by tasks raising
                :class:`durq.PauseQueue`, or any name (e.g. ``env`` for a pause an app
                keeps from its configuration); see :meth:`resume`.

        Returns:
            True when this call paused the queue, False when it was paused already.

        Raises:
            ConfigError: an empty or over-long queue or source (1..200 characters), or a
                reason that is not a str.
        """
        _check_name("queue", queue)
        _check_name("source", source)
        if not isinstance(reason, str):
            raise ConfigError(f"reason must be a str, not {type(reason).__name__}")
        done = self.store.pause_queue(queue, reason, source)
        if done:
            events.emit("queue_paused", queue=queue, source=source, reason=reason)
        return done

    def resume(self, queue: str, source: str | None = None) -> bool:
        """Clear the pause of ``queue``; workers claim from it again at their next claim.

        Args:
            queue: the queue's name.
            source: when given, only a pause made by this source is cleared. An app that
                keeps a pause of its own (``dq.pause(q, "maintenance", source="env")``) can
                let its admin endpoint call ``dq.resume(q, source="admin")``, which then
                cannot clear it. None (default, and ``durq resume``) clears any pause.

        Returns:
            True when this call cleared a pause; False when the queue was not paused, or was
            paused by another source than ``source`` (nothing changed).

        Raises:
            ConfigError: an empty or over-long queue or source.
        """
        _check_name("queue", queue)
        if source is not None:
            _check_name("source", source)
        done = self.store.resume_queue(queue, source)
        if done:
            events.emit("queue_resumed", queue=queue, source=source)
        return done

    def paused(self, queue: str) -> QueuePause | None:
        """The pause of ``queue`` (:class:`durq.pause.QueuePause`: queue, reason, source,
        paused_at), or None when it is not paused.

        Raises:
            ConfigError: an empty or over-long queue name.
        """
        return self.store.queue_pause(_check_name("queue", queue))

    def on_alert(self, fn: F) -> F:
        """Register ``fn(alert)`` to receive alerts (use as ``@dq.on_alert``).

        ``alert`` is a :class:`durq.Alert`. Hooks run in the process that raised the alert
        (a worker raises them for tasks of its app, e.g. on :class:`durq.PauseQueue`; a
        worker runs the app's module, so hooks registered there are present), after the
        alert was recorded, one after another; one that raises is logged
        (``alert_hook_failed``) and never breaks the caller. Returns ``fn``.

        Raises:
            ConfigError: ``fn`` is not callable.
        """
        self._alert_hooks.add(fn)
        return fn

    def alert(
        self,
        key: str,
        message: str,
        *,
        severity: str = "warning",
        cooldown: float = DEFAULT_COOLDOWN,
    ) -> Alert | None:
        """Raise an alert, at most once per ``cooldown`` per ``key`` across every process
        on this database.

        In one statement on the ``alerts`` table: when ``key`` was never sent, or was last
        sent ``cooldown`` seconds ago or more (store clock; the database's on PostgreSQL),
        the alert is sent: the hooks of :meth:`on_alert` run here, after the commit, with
        :attr:`Alert.suppressed` counting the raises of this key that were not sent since
        the previous send. Otherwise it is counted and not sent. Two processes raising the
        same key at the same instant send once.

        Args:
            key: the cooldown key (1..200 characters), e.g. ``pause:downloads``.
            message: the alert's text.
            severity: ``info``, ``warning`` (default), ``error`` or ``critical``.
            cooldown: seconds (>= 0) within which the same key is counted, not sent;
                default 600 (10 minutes, issue 4).

        Returns:
            The :class:`durq.Alert` handed to the hooks, or None when it was suppressed.

        Raises:
            ConfigError: a bad key, message, severity or cooldown (nothing recorded).
            StoreBusy, StoreError: the alert could not be recorded (no hook ran).
        """
        check_alert_args(key, message, severity, cooldown)
        sent = self.store.raise_alert(key, message, severity, float(cooldown))
        if sent is None:
            events.emit(ALERT_SUPPRESSED, key=key)
            return None
        events.emit(ALERT_SENT, logging.WARNING, key=key, suppressed=sent.suppressed)
        self._alert_hooks.deliver(sent)
        return sent

    @property
    def _alert_hooks(self) -> AlertHooks:
        hooks = self.__dict__.get("_durq_alert_hooks")
        if hooks is None:  # created on first use; setdefault keeps one under threads
            hooks = self.__dict__.setdefault("_durq_alert_hooks", AlertHooks())
        assert isinstance(hooks, AlertHooks)
        return hooks
