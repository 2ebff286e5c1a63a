"""One child's place in the process pool, and the outcome of a body that was stopped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from durq.model import Outcome
from durq.worker.pool.children import Child, describe_exit
from durq.worker.pool.protocol import ChildDied

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.executor import Executor
    from durq.worker.state import Attempt

MB = 1024 * 1024


class Slot:
    """One child and the attempts sent to it, in order: the first (the head) is the one
    it runs, since ``head_since``; the others wait behind it in the child."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.child: Child | None = None
        self.sent: list[Attempt] = []
        self.head_since = 0.0
        self.deadline: float | None = None  # the head's timeout, as time.monotonic()
        self.reason: str | None = None  # why the head's body is being stopped, once it is
        self.signalled_at = 0.0
        self.memory_at = 0.0  # when its memory was last read
        self.doomed: dict[int, str] = {}  # waiting attempts interrupted: id -> reason
        self.asked_back = False  # a TakeBack of the waiting attempts is on its way
        self.retiring = ""  # why it is replaced once it holds nothing more ("": it is not)
        self.dying = False  # signalled, but the body it was meant for had ended
        self.failures = 0  # failed starts in a row
        self.respawn_at: float | None = None


def stopped_outcome(
    executor: Executor,
    app: Registry,
    attempt: Attempt,
    reason: str | None,
    code: int | None,
    rss: int,
    max_memory: float | None,
) -> Outcome:
    """The outcome of an attempt whose body was stopped (``reason``: ``"timeout"``,
    ``"cancelled"``, ``"expired"``, ``"lease_lost"``, ``"shutdown"``, ``"memory"``) or whose child died
    (``reason`` None). ``code``: the child's exit status; None: the body never started.
    ``rss``: the child's memory in bytes when it was stopped."""
    job = attempt.job
    task = app.tasks[job.task]
    if reason == "timeout":
        return executor.timed_out(job, task.timeout or 0.0)
    if code is None:
        message = f"the job was stopped ({reason}) before its body started"
        return executor.failed(job, "Interrupted", message, reason or "")
    if reason in ("cancelled", "expired", "lease_lost", "shutdown"):
        message = f"the body was stopped ({reason}); its child ended by {describe_exit(code)}"
        return executor.failed(job, "Interrupted", message, reason)
    if reason == "memory":
        message = (
            f"worker child died: killed at {rss / MB:.0f} MB, over max_memory_per_child "
            f"{(max_memory or 0) / MB:g} MB"
        )
    else:
        message = f"worker child died: {describe_exit(code)}"
    return executor.errored(job, task, ChildDied(message))
