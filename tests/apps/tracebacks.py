"""Tasks that fail inside a helper, for the stored-traceback tests
(tests/integration/test_task_tracebacks.py). DURQ_URL names the database."""

from __future__ import annotations

import durq

dq = durq.Durq()  # DURQ_URL, or set by the test before the worker starts


def parse(text: str) -> int:
    """The helper the tasks call: it raises for anything but digits."""
    if not text.isdigit():
        raise ValueError(f"not a number: {text!r}")
    return int(text)


@dq.task(queue="tb", max_attempts=1)
def in_helper(text: str) -> int:
    return parse(text)


@dq.task(queue="tb", max_attempts=1)
def chained(text: str) -> int:
    try:
        return parse(text)
    except ValueError as exc:
        raise LookupError(f"no record for {text!r}") from exc


@dq.task(queue="tb", max_attempts=1)
async def in_helper_async(text: str) -> int:
    return parse(text)


#: The text of ``huge``'s exception: 4 MiB, as an HTTP error carrying a whole response body.
HUGE = "START" + "E" * (4 * 1024 * 1024) + "END"


@dq.task(queue="tb", max_attempts=3, backoff=durq.constant(0))
def huge() -> None:
    raise ValueError(HUGE)
