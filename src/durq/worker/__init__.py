"""The worker: small services (claimer, heartbeat, reaper, timeouts) around
an executor, supervised by :class:`Worker`."""

from durq.worker.worker import Worker

__all__ = ["Worker"]
