"""The process pool: N long-lived child processes that run ``def`` task bodies.

``pool.py`` (ProcessPool: slots, timeouts, interrupts, recycling), ``children.py``
(spawning, signalling and reaping one child), ``protocol.py`` (the messages on the pipes),
``child.py`` (the child's own loop). See docs/features/pools.md.
"""

from durq.worker.pool.pool import ProcessPool

__all__ = ["ProcessPool"]
