"""Job: a handle on one stored job, as users see it."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from durq.codecs import UndecodableValue, decode_with, describe_sealed
from durq.errors import JobFailed, JobNotFound
from durq.model import TERMINAL_STATES, AttemptError, JobRecord, JobState
from durq.model.jobs import HISTORY_TRIMMED_KIND
from durq.payload import decode

if TYPE_CHECKING:
    from durq.store.base import Store


class Job:
    """A stored job. Attributes reflect the row as last read; :meth:`refresh` re-reads it.

    Attributes:
        id: the job's id (int).
        queue, task: where it runs and which task runs it.
        state: a :class:`durq.JobState`; ``scheduled`` is a queued job whose ``run_at`` is ahead.
        attempts: attempts used so far; max_attempts: the attempts it may use.
        run_at, created_at, started_at, finished_at: seconds since the epoch (or None).
        key: its idempotency key, or None. priority: lower runs first.
        payload: the task's keyword arguments (dict).
        meta: the free-form JSON the producer tagged it with.
        deadline, notice_at, noticed_at, park_expires_at: deadline times (epoch seconds, or
            None; docs/features/deadlines.md and parked.md).
        batch_id: the batch it belongs to, or None (docs/features/batches.md).
        snoozes: times it was snoozed since it was enqueued or last replayed (int;
            docs/features/snooze.md).
    """

    __slots__ = ("_record", "_store")

    def __init__(self, store: Store, record: JobRecord) -> None:
        self._store = store
        self._record = record

    def __repr__(self) -> str:
        return (
            f"<Job {self.id} {self.task} {self.state} attempts={self.attempts}/{self.max_attempts}>"
        )

    @property
    def id(self) -> int:
        return self._record.id

    @property
    def queue(self) -> str:
        return self._record.queue

    @property
    def task(self) -> str:
        return self._record.task

    @property
    def state(self) -> str:
        """A :class:`durq.JobState` (a ``str``); a damaged row's raw value is returned as is,
        so that one bad row cannot make listing jobs fail."""
        r = self._record
        try:
            if r.state == JobState.QUEUED and float(r.run_at) > self._store.now():
                return JobState.SCHEDULED
            return JobState(r.state)
        except (TypeError, ValueError):
            return str(r.state)

    @property
    def attempts(self) -> int:
        return self._record.attempts

    @property
    def max_attempts(self) -> int:
        return self._record.max_attempts

    @property
    def priority(self) -> int:
        return self._record.priority

    @property
    def key(self) -> str | None:
        return self._record.key

    @property
    def run_at(self) -> float:
        return self._record.run_at

    @property
    def created_at(self) -> float:
        return self._record.created_at

    @property
    def started_at(self) -> float | None:
        return self._record.started_at

    @property
    def finished_at(self) -> float | None:
        return self._record.finished_at

    @property
    def deadline(self) -> float | None:
        """When the job expires if not finished (epoch seconds), or None."""
        return self._record.deadline

    @property
    def notice_at(self) -> float | None:
        """When its task's ``on_slow`` becomes due if not finished (epoch seconds), or None."""
        return self._record.notice_at

    @property
    def noticed_at(self) -> float | None:
        """When the sweeper arranged ``on_slow`` for it, or None."""
        return self._record.noticed_at

    @property
    def park_expires_at(self) -> float | None:
        """When a parked job that was not adopted expires (epoch seconds), or None."""
        return self._record.park_expires_at

    @property
    def batch_id(self) -> int | None:
        """The batch it belongs to (``dq.batch``; see :meth:`durq.Durq.batch_status`), or None."""
        return self._record.batch_id

    @property
    def snoozes(self) -> int:
        """Times the job was snoozed (put back without spending an attempt) since it was
        enqueued or last replayed; bounded by its task's ``max_snoozes``."""
        return int(self._record.snoozes or 0)

    @property
    def worker_id(self) -> str | None:
        return self._record.worker_id

    @property
    def payload(self) -> Any:
        """The task's keyword arguments (dict); ``"encrypted (key k1)"`` when the payload
        is encrypted and this app has no codec with that key (docs/features/encryption.md)."""
        return self._open(self._record.payload)

    def _open(self, stored: str | None) -> Any:
        if stored is None:
            return None
        try:
            return decode(decode_with(getattr(self._store, "codec", None), stored))
        except UndecodableValue as exc:
            return describe_sealed(stored) if isinstance(stored, str) else f"unreadable: {exc}"

    @property
    def meta(self) -> Any:
        return decode(self._record.meta)

    @property
    def result(self) -> Any:
        """The task's return value (decoded JSON), or None before it succeeded;
        ``"encrypted (key k1)"`` when it is encrypted and this app lacks the key."""
        return self._open(self._record.result)

    @property
    def progress(self) -> dict[str, Any] | None:
        """The last progress the task wrote: ``{"fraction": float, "message": str, ...}``."""
        value = decode(self._record.progress)
        return value if isinstance(value, dict) else None

    @property
    def errors(self) -> list[AttemptError]:
        """One entry per failed or lost attempt, oldest first (kept across retries), and the
        entries of a job ended without running (kind ``parent_failed``,
        ``unstorable_payload``: ``attempt`` 0). The store keeps the first entry and the last
        :data:`durq.model.jobs.HISTORY_KEPT` (20); :attr:`errors_dropped` counts those in
        between that it dropped."""
        return self._history()[0]

    @property
    def errors_dropped(self) -> int:
        """How many entries of the error history the store dropped (after the first; 0
        when none): it keeps the first and the last :data:`durq.model.jobs.HISTORY_KEPT`."""
        return self._history()[1]

    def _history(self) -> tuple[list[AttemptError], int]:
        """The entries (without the ``history_trimmed`` marker) and the marker's count."""
        try:
            raw = json.loads(self._record.errors or "[]")
        except ValueError:
            return [], 0
        if not isinstance(raw, list):
            return [], 0
        dropped = 0
        if len(raw) > 1 and isinstance(raw[1], dict) and raw[1].get("kind") == HISTORY_TRIMMED_KIND:
            try:
                dropped = max(int(raw[1].get("dropped", 0)), 0)
            except (TypeError, ValueError):
                dropped = 0
            raw = [raw[0], *raw[2:]]
        return [AttemptError.from_dict(e) for e in raw if isinstance(e, dict)], dropped

    @property
    def last_error(self) -> AttemptError | None:
        errors = self.errors
        return errors[-1] if errors else None

    @property
    def parents(self) -> list[int]:
        """Ids of the jobs this one waits for (``after=``), in id order (a read per call)."""
        return [e.parent_id for e in self._store.edges([self.id]) if e.child_id == self.id]

    @property
    def children(self) -> list[int]:
        """Ids of the jobs that wait for this one, in id order (a read per call)."""
        edges = self._store.edges([self.id])
        return sorted(e.child_id for e in edges if e.parent_id == self.id)

    @property
    def tags(self) -> list[str]:
        """The job's tags (``options(tags=[...])``), sorted (a read per call)."""
        return self._store.tags_of(self.id)

    def refresh(self) -> Job:
        """Re-read the row. Returns self.

        Raises:
            JobNotFound: the job was pruned or deleted.
        """
        record = self._store.get(self.id)
        if record is None:
            raise JobNotFound(f"job {self.id} no longer exists")
        self._record = record
        return self

    def wait(self, timeout: float | None = None, poll: float = 0.05) -> Any:
        """Block until the job is terminal and return its result.

        Args:
            timeout: seconds to wait at most; None waits forever.
            poll: first polling interval in seconds (it grows to 0.5 s).

        Returns:
            The task's return value (decoded JSON).

        Raises:
            JobFailed: the job ended failed, cancelled or expired (``.error`` is the last
                recorded error).
            TimeoutError: still not terminal after ``timeout`` seconds; the message says
                whether a live worker watches its queue, and in which database (a relative
                ``sqlite:///durq.db`` from another directory is another database).
            JobNotFound: the job disappeared.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll
        while True:
            self.refresh()
            if self.state in TERMINAL_STATES:
                if self.state == JobState.SUCCEEDED:
                    return self.result
                raise JobFailed(self, self.last_error)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"job {self.id} still {self.state} after {timeout} s; {self._watchers()}"
                    )
                interval = min(interval, left)
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)

    async def await_result(self, timeout: float | None = None, poll: float = 0.05) -> Any:
        """:meth:`wait` for asyncio callers: the reads run in a thread and the waits are
        ``asyncio.sleep``, so the event loop is never blocked.

        Args:
            timeout: seconds to wait at most; None waits forever.
            poll: first polling interval in seconds (it grows to 0.5 s).

        Returns:
            The task's return value (decoded JSON).

        Raises:
            JobFailed: the job ended failed, cancelled or expired.
            TimeoutError: still not terminal after ``timeout`` seconds (the message says
                whether a live worker watches its queue, and in which database).
            JobNotFound: the job disappeared.
        """
        import asyncio

        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll
        while True:
            await asyncio.to_thread(self.refresh)
            if self.state in TERMINAL_STATES:
                if self.state == JobState.SUCCEEDED:
                    return self.result
                raise JobFailed(self, self.last_error)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    watchers = await asyncio.to_thread(self._watchers)
                    raise TimeoutError(
                        f"job {self.id} still {self.state} after {timeout} s; {watchers}"
                    )
                interval = min(interval, left)
            await asyncio.sleep(interval)
            interval = min(interval * 1.5, 0.5)

    def _watchers(self) -> str:
        """Who could run this job, for a timeout's message: the live workers that claim its
        queue and task, and the database they were looked for in."""
        from durq.store import describe_url

        where = describe_url(self._store.url)
        try:
            data = self._store.status_data()
        except Exception:  # noqa: BLE001 - only a message
            return f"database {where}"
        live = [
            w
            for w in data.workers
            if self.queue in w.queues
            and self.task in w.tasks
            and data.now - w.last_seen <= 2 * w.lease
        ]
        if not live:
            return (
                f"no live worker watches queue {self.queue!r} for task {self.task!r} in "
                f"{where} (is the worker running, on this same database?)"
            )
        return f"{len(live)} live worker(s) watch queue {self.queue!r} in {where}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view of the job (used by the CLI's ``--json``)."""
        return {
            "id": self.id,
            "queue": self.queue,
            "task": self.task,
            "state": str(self.state),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
            "key": self.key,
            "run_at": self.run_at,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "worker_id": self.worker_id,
            "payload": self.payload,
            "meta": self.meta,
            "result": self.result,
            "progress": self.progress,
            "errors": [e.to_dict() for e in self.errors],
            "errors_dropped": self.errors_dropped,
            "deadline": self.deadline,
            "notice_at": self.notice_at,
            "noticed_at": self.noticed_at,
            "park_expires_at": self.park_expires_at,
            "batch_id": self.batch_id,
            "snoozes": self.snoozes,
        }
