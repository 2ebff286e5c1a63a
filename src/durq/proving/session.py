"""What a proving run does around its work: it checks its settings (:func:`begin`), refuses a
queue that already holds jobs (:func:`require_empty`), and afterwards removes everything it
created (:func:`clean_up`), on failure and Ctrl-C too."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from durq.app import Durq
from durq.errors import DurqError
from durq.proving.processes import WorkerPool
from durq.proving.report import absolute_url

#: Every state a proving run deletes from its own queue afterwards, whatever is left in it.
ALL_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "expired")
#: States a job never leaves by itself.
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "expired"})


class QueueNotEmpty(DurqError):
    """The queue ``durq verify`` or ``durq soak`` would use already holds jobs; nothing was
    changed."""


class _Settings(Protocol):
    """What :func:`begin` needs of a driver's settings."""

    @property
    def url(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

    def check(self) -> None: ...


class Start(NamedTuple):
    """What every run starts from: where progress lines go, the database URL made absolute
    and the seed (drawn when the settings have none; reported)."""

    say: Callable[[str], None]
    url: str
    seed: int


def begin(settings: _Settings, progress: Callable[[str], None] | None) -> Start:
    """Check ``settings`` and work out the :class:`Start` of a run.

    Args:
        settings: the driver's settings (``url``, ``seed``, ``check()``).
        progress: where progress lines go (None: nowhere).

    Raises:
        ConfigError: a bad figure or URL.
    """
    settings.check()
    say = progress or (lambda _line: None)
    seed = settings.seed if settings.seed is not None else secrets.randbits(32)
    return Start(say, absolute_url(settings.url), seed)


def require_empty(app: Durq, queue: str, message: str) -> None:
    """Check that ``queue`` holds no job at all, in any state.

    Raises:
        QueueNotEmpty: with ``message``, when it holds one.
    """
    if app.store.list_jobs(state=None, queue=queue, task=None, limit=1):
        raise QueueNotEmpty(message)


def clean_up(
    app: Durq,
    pool: WorkerPool | None,
    say: Callable[[str], None],
    *,
    queue: str,
    purge: Sequence[str] | None,
    workdir: Path | None,
    first: Sequence[Callable[[], object]] = (),
) -> None:
    """Remove what a run created, in this order: the ``first`` steps, every worker process
    (stopped), the jobs of ``queue`` in the ``purge`` states (None: none was written), the
    workers' registrations, ``app`` (closed) and ``workdir`` (None: kept).

    Each step runs even when an earlier one failed; each failure is reported through ``say``
    and the first is re-raised at the end.
    """
    errors: list[BaseException] = []

    def step(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - report every cleanup failure, go on
            errors.append(exc)
            say(f"cleanup: {type(exc).__name__}: {exc}")

    for fn in first:
        step(fn)
    if pool is not None:
        step(pool.stop)
    if purge is not None:
        states = purge
        step(lambda: app.purge(queue, states=states))
    if pool is not None:
        step(lambda: pool.unregister(app))
    step(app.close)
    if workdir is not None:
        dirname = workdir
        step(lambda: shutil.rmtree(dirname, ignore_errors=True))
    if errors:
        raise errors[0]
