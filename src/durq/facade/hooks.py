"""HooksFacade: ``dq.find()`` and the checks of a task's ``on_fail`` / ``hook_queue``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durq.checks import _check_name
from durq.errors import ConfigError
from durq.facade.base import FacadeBase
from durq.job import Job


class HooksFacade(FacadeBase):
    """Hooks: a mixin of :class:`durq.Durq`."""

    def find(self, queue: str, key: str) -> Job | None:
        """The job of ``queue`` that holds the idempotency key ``key``, or None.

        Keys are unique per queue (a second enqueue with the same ``(queue, key)`` returns
        the first job), so this finds a job from the key its producer chose, without storing
        its id. A hook job is found the same way: ``dq.find(hook_queue, "durq.fail:<id>")``.

        Raises:
            ConfigError: ``queue`` or ``key`` is not a non-empty str (key: up to 1000
                characters) of valid Unicode text.
            StoreError: the database could not be read.
        """
        _check_name("queue", queue)
        _check_name("key", key, 1000)
        record = self.store.find(queue, key)
        return None if record is None else Job(self.store, record)

    @staticmethod
    def _hook_options(
        on_fail: Callable[[Job], Any] | None, hook_queue: str | None
    ) -> dict[str, Any]:
        """Checked ``on_fail`` and ``hook_queue`` of a task (keyword arguments of Task)."""
        if on_fail is not None and not callable(on_fail):
            raise ConfigError(f"on_fail must be a callable fn(job), not {on_fail!r}")
        if hook_queue is not None:
            _check_name("hook_queue", hook_queue)
        return {"on_fail": on_fail, "hook_queue": hook_queue}
