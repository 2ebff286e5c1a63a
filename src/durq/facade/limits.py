"""LimitsFacade: ``dq.limit()`` holds and ``dq.limits()`` usage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durq.facade.base import FacadeBase
from durq.limits import Hold

if TYPE_CHECKING:
    pass


class LimitsFacade(FacadeBase):
    """Task limits: a mixin of :class:`durq.Durq`."""

    def limit(
        self, name: str, concurrency: int, *, lease: float = 60.0, timeout: float | None = None
    ) -> Hold:
        """A slot of the named limit ``name`` for code outside the queue.

        ``with dq.limit("downloads", 3):`` waits until jobs of key ``"downloads"`` in
        ``running`` plus live holds of it are fewer than ``concurrency``, then holds one
        slot until the block ends; queued jobs of that key are not claimed while the slots
        are taken. The hold is a row with a lease, extended by a thread every
        ``lease / 3`` s, so a process that dies holding it frees the slot after ``lease``.

        Args:
            name: the limit key (a task's ``concurrency_key``, or its name by default).
            concurrency: the limit (>= 1), checked against the shared count at acquire.
            lease: seconds a hold survives without an extension (default 60).
            timeout: seconds to wait for a slot (default: for ever).

        Raises:
            ConfigError: bad arguments.
            LimitTimeout: no slot within ``timeout`` (nothing held).
            StoreError: the database could not be used.
        """
        return Hold(self, name, concurrency, lease=lease, timeout=timeout)

    def limits(self) -> list[dict[str, Any]]:
        """Every limit key in use: ``name``, ``running``, ``held``, ``queued``,
        ``concurrency`` (the largest stored on its jobs, or None)."""
        return [
            {
                "name": u.name,
                "running": u.running,
                "held": u.held,
                "queued": u.queued,
                "concurrency": u.concurrency,
            }
            for u in self.store.limit_usage()
        ]
