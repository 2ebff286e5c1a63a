"""One child's place in the process pool, and the outcome of a body that was stopped."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from durq.model import Outcome
from durq.worker.pool.children import Child, describe_exit
from durq.worker.pool.protocol import DEPTH, ChildDied, TakeBack

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.executor import Executor
    from durq.worker.state import Attempt

MB = 1024 * 1024

#: Seconds between the loop's checks of the children (timeouts, kills due, memory, new
#: children that do not answer) while any holds a job.
WATCH_TICK = 0.01
#: Seconds between two reads of a busy child's memory.
MEMORY_TICK = 0.05
#: A next job is sent to a child only while the one it runs started less than this many
#: seconds ago (short jobs: the hand-off hides the pipe's round trip)...
HOLD = 0.005
#: ...and is taken back once the one it waits behind has run this many seconds, for the
#: next free child (a long body never holds a job that another child could run).
TAKE_BACK_AFTER = 0.02


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
        self.rss = 0  # bytes the child held when found over max_memory_per_child (else 0)
        # waiting attempts interrupted: (job id, token) -> reason
        self.doomed: dict[tuple[int, int], str] = {}
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


def free_slot(slots: list[Slot], now: float) -> Slot | None:
    """The slot whose child takes the next job (``now``: ``time.monotonic()``): one that
    holds nothing, else one whose running body started less than :data:`HOLD` ago (the
    job then waits in the child behind it); None when no child can take one now."""
    behind: Slot | None = None
    for slot in slots:
        child = slot.child
        if child is None or not child.ready or slot.retiring:
            continue
        if not slot.sent:
            return slot
        if (
            behind is None
            and len(slot.sent) < DEPTH
            and not slot.asked_back
            and slot.reason is None
            and now - slot.head_since < HOLD
        ):
            behind = slot
    return behind


def wait_ms(slots: list[Slot], retired: bool) -> float | None:
    """How long the pool's loop may sleep in poll, in ms (None: until a pipe or a
    wake-up): a tick while any child holds a job, starts, retires or is due to start."""
    if retired or any(
        s.sent
        or s.retiring
        or s.respawn_at is not None
        or (s.child is not None and not s.child.ready)
        for s in slots
    ):
        return WATCH_TICK * 1000
    return None


def take_back_waiting(slots: list[Slot]) -> bool:
    """Ask every child for the jobs waiting behind the one it runs (the worker is
    stopping: they go back to the queue unstarted, as :class:`TakeBack` answers come in).
    Returns True."""
    for slot in slots:
        if slot.child is not None and len(slot.sent) > 1 and not slot.asked_back:
            slot.asked_back = True
            with contextlib.suppress(OSError):
                slot.child.send(TakeBack(tuple(a.key for a in slot.sent[1:])))
    return True
