"""durq in your own tests: temporary databases, running jobs in the test, assertions.

::

    from durq.testing import assert_enqueued, drain

    def test_signup_sends_mail(durq_app):          # fixture from the pytest plugin
        send_mail = durq_app.task(send_mail_fn)
        signup(durq_app, "ada@example.org")
        assert_enqueued(send_mail, to="ada@example.org")
        result = drain(durq_app)                     # runs it here, retries included
        assert result.succeeded

The pytest plugin (:mod:`durq.testing.plugin`, loaded through the ``pytest11`` entry
point) adds the fixtures ``durq_url`` and ``durq_app``; see docs/features/testing.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from durq.app import Durq
from durq.context import JobContext, direct_context
from durq.job import Job
from durq.task import Task
from durq.worker.inline import DrainResult
from durq.worker.inline import drain as _drain

__all__ = [
    "DrainResult",
    "JobContext",
    "assert_enqueued",
    "assert_not_enqueued",
    "direct_context",
    "drain",
    "eager",
    "enqueued",
    "temporary_url",
    "use_url",
]

#: The states :func:`enqueued` looks at by default: waiting to run (scheduled included).
WAITING = ("queued", "scheduled")


def drain(
    dq: Durq, *, queues: list[str] | None = None, max_jobs: int = 10_000, skip_backoff: bool = True
) -> DrainResult:
    """Run ``dq``'s due jobs in this thread until none is left (:func:`durq.worker.inline.drain`).

    Args:
        dq: the app.
        queues: the queues to serve (default: all its tasks' queues).
        max_jobs: at most this many attempts.
        skip_backoff: retries are due at once (False: keep the backoff; move an injected
            clock and drain again).

    Returns:
        :class:`DrainResult`: ``ran``, ``succeeded``, ``failed``, ``retried`` job ids.

    Raises:
        ConfigError: no registered tasks, or ``max_jobs`` < 1.
    """
    return _drain(dq, queues=queues, max_jobs=max_jobs, skip_backoff=skip_backoff)


def _task_name(task: Task[Any, Any] | str) -> str:
    return task if isinstance(task, str) else task.name


def _app_of(task: Task[Any, Any] | str, dq: Durq | None) -> Durq:
    if dq is not None:
        return dq
    if isinstance(task, Task) and isinstance(task.app, Durq):
        return task.app
    raise TypeError("give dq= when the task is named by a string")


def enqueued(
    task: Task[Any, Any] | str | None = None,
    *,
    dq: Durq | None = None,
    states: tuple[str, ...] = WAITING,
    limit: int = 10_000,
    **payload_subset: Any,
) -> list[Job]:
    """The jobs of ``task`` (all tasks when None; then ``dq`` is needed) in ``states``
    whose payload holds every key of ``payload_subset`` with an equal value, oldest first.

    Raises:
        TypeError: no app to look in (``task`` is a name or None and ``dq`` was not given).
    """
    if task is None:
        if dq is None:
            raise TypeError("give a task or dq=")
        app, name = dq, None
    else:
        app, name = _app_of(task, dq), _task_name(task)
    found: list[Job] = []
    for state in states:
        found.extend(app.jobs(state=state, task=name, limit=limit))
    matching = [j for j in found if _holds(j.payload, payload_subset)]
    return sorted(matching, key=lambda j: j.id)


def _holds(payload: Any, subset: Mapping[str, Any]) -> bool:
    return isinstance(payload, dict) and all(
        k in payload and payload[k] == v for k, v in subset.items()
    )


def assert_enqueued(
    task: Task[Any, Any] | str,
    *,
    dq: Durq | None = None,
    count: int | None = None,
    states: tuple[str, ...] = WAITING,
    **payload_subset: Any,
) -> Job:
    """Assert that a job of ``task`` whose payload holds ``payload_subset`` is waiting.

    Args:
        task: the task (or its name, with ``dq=``).
        count: when given, exactly this many such jobs must be there.
        states: the states that count (default queued and scheduled).
        **payload_subset: keys the payload must hold, with equal values.

    Returns:
        The newest matching :class:`durq.Job`.

    Raises:
        AssertionError: none matches (or not ``count``); the message lists the jobs of the
            task that are there, so a misspelt key shows.
    """
    matching = enqueued(task, dq=dq, states=states, **payload_subset)
    if matching and (count is None or len(matching) == count):
        return matching[-1]
    there = enqueued(task, dq=dq, states=states)
    listed = "\n".join(f"  job {j.id} {j.state} {j.payload}" for j in there[:20]) or "  (none)"
    wanted = f"{count} job(s)" if count is not None else "a job"
    raise AssertionError(
        f"expected {wanted} of {_task_name(task)} ({'/'.join(states)}) with payload "
        f"including {payload_subset}; found {len(matching)}. Jobs of that task:\n{listed}"
    )


def assert_not_enqueued(
    task: Task[Any, Any] | str,
    *,
    dq: Durq | None = None,
    states: tuple[str, ...] = WAITING,
    **payload_subset: Any,
) -> None:
    """Assert that no job of ``task`` whose payload holds ``payload_subset`` is waiting.

    Raises:
        AssertionError: one is; the message names it.
    """
    matching = enqueued(task, dq=dq, states=states, **payload_subset)
    if matching:
        ids = [j.id for j in matching]
        raise AssertionError(
            f"expected no job of {_task_name(task)} with payload including {payload_subset}; "
            f"found jobs {ids}"
        )


@contextlib.contextmanager
def eager(dq: Durq) -> Iterator[Durq]:
    """Inside the block, every enqueue on ``dq`` runs the due jobs before it returns
    (``Durq(eager=True)`` for a block). For tests only: a worker refuses to start on it."""
    before = dq.eager
    dq.eager = True
    try:
        yield dq
    finally:
        dq.eager = before


@contextlib.contextmanager
def use_url(dq: Durq, url: str) -> Iterator[Durq]:
    """Point an existing app (the one your code imports) at ``url`` for the block; its
    store is closed on entry and exit, and the old URL comes back afterwards."""
    before = dq.url
    dq.close()
    dq.url = url
    try:
        yield dq
    finally:
        dq.close()
        dq.url = before


@contextlib.contextmanager
def temporary_url(base: str | None = None) -> Iterator[str]:
    """A URL to an empty database that is removed afterwards.

    Args:
        base: None or a ``sqlite:`` URL for a SQLite file in a fresh temporary directory
            (deleted afterwards); a ``postgresql://`` URL for a fresh schema
            ``durq_test_<hex>`` on that server (dropped afterwards with ``CASCADE``).

    Raises:
        ConfigError: (from durq.store) when the URL names another scheme, on first use.
        ImportError: a PostgreSQL URL without psycopg installed (``durq[postgres]``).
    """
    if base and base.startswith(("postgresql://", "postgres://")):
        import psycopg

        schema = f"durq_test_{uuid.uuid4().hex[:12]}"
        parts = urlsplit(base)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"]
        server = urlunsplit(parts._replace(query=urlencode(query)))
        try:
            yield urlunsplit(parts._replace(query=urlencode([*query, ("schema", schema)])))
        finally:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    directory = tempfile.mkdtemp(prefix="durq-test-")
    try:
        yield f"sqlite:///{os.path.join(directory, 'jobs.db')}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
