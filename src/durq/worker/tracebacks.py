"""A failed attempt's traceback as its user reads it: starting at the task's own frames.

An exception raised by a task body unwinds through the worker's executor (and, in a
thread, its interrupt guard) before it is caught, so Python's traceback of it starts with
two or three of durq's frames. Celery, RQ and Sidekiq show the job's frames; so does this:
the leading frames that belong to durq's package are dropped, from the first frame of
anything else (the task) on everything is kept, also durq's frames the task called into
(``ctx.step``, ``dq.enqueue``). Each exception of a chain (``raise … from``, an exception
during handling of another, the members of an ``ExceptionGroup``) is trimmed the same way
and the chain's ``The above exception…`` / ``During handling…`` parts are kept. A
traceback whose frames are all durq's (an error of durq's own) is kept whole.
"""

from __future__ import annotations

import os
import traceback

#: Where durq's modules live (``…/durq/``): frames whose file is under it are durq's.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_durq_frame(filename: str) -> bool:
    """Whether a frame's file (``co_filename``) is one of durq's own modules."""
    return filename.startswith(PACKAGE_DIR)


def format_task_error(exc: BaseException) -> str:
    """The traceback of ``exc``, raised by a task, as stored in the job's error history.

    Args:
        exc: the exception that escaped the task body, with its ``__traceback__``.

    Returns:
        The text :func:`traceback.format_exception` gives, except that each exception's
        leading frames in durq's package are left out (all are kept when every frame is
        durq's). Never raises for an exception whose traceback Python can format.
    """
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    pending = [te]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        _trim(current.stack)
        for nested in (current.__cause__, current.__context__, *(current.exceptions or ())):
            if nested is not None:
                pending.append(nested)
    return "".join(te.format())


def _trim(stack: traceback.StackSummary) -> None:
    """Drop the leading frames of durq's package, unless every frame is one of them."""
    for i, frame in enumerate(stack):
        if not is_durq_frame(frame.filename):
            del stack[:i]
            return
