"""The process pool: N long-lived child processes that run ``def`` task bodies.

``pool.py`` (ProcessPool: its loop, timeouts, interrupts, recycling), ``slot.py``
(a child's place, stopped outcomes), ``children.py``
(spawning, signalling and reaping one child), ``protocol.py`` (the messages on the pipes),
``child.py`` (the child's own loop). See docs/features/pools.md.
"""

from durq.worker.pool.pool import ProcessPool

__all__ = ["ProcessPool"]
