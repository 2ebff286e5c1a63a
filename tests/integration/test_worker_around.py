"""``Worker(around=...)``: a framework's context around each body, on the thread or in the
asyncio task that runs it (what ``flask durq worker`` and ``manage.py durq_worker`` pass)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import durq

#: What a framework's context sets, as Flask's app context does.
CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="none")


def test_each_def_and_async_body_runs_inside_around(
    make_any: Callable[..., durq.Durq], drain
) -> None:
    app = make_any()
    entered: list[tuple[str, int]] = []
    left: list[int] = []

    @contextmanager
    def scope() -> Iterator[None]:
        entered.append(("in", threading.get_ident()))
        token = CURRENT.set("framework")
        try:
            yield
        finally:
            CURRENT.reset(token)
            left.append(threading.get_ident())

    @app.task
    def seen() -> tuple[str, int]:
        return CURRENT.get(), threading.get_ident()

    @app.task
    async def seen_async() -> str:
        await asyncio.sleep(0)
        return CURRENT.get()

    jobs = [seen.enqueue() for _ in range(4)]
    later = seen_async.enqueue()
    drain(app, concurrency=2, around=scope)
    results = [j.wait(1) for j in jobs]
    assert all(value == "framework" for value, _ in results)
    assert later.wait(1) == "framework"
    body_threads = {thread for _, thread in results}
    assert body_threads <= {thread for _, thread in entered}  # entered where the body ran
    assert len(entered) == len(left) == 5  # once per body, and always left
    assert CURRENT.get() == "none"


def test_an_error_in_around_fails_the_attempt_like_the_bodys_own(make_any, drain) -> None:
    app = make_any()
    ran: list[int] = []

    @contextmanager
    def broken() -> Iterator[None]:
        raise RuntimeError("no app context today")
        yield  # pragma: no cover - a generator that raises before its yield

    @app.task(max_attempts=1)
    def body() -> None:
        ran.append(1)

    job = body.enqueue()
    drain(app, around=broken)
    job.refresh()
    assert job.state == "failed" and ran == []
    assert "no app context today" in job.errors[-1].message


def test_around_is_refused_with_the_process_pool(make_any) -> None:
    app = make_any()
    app.task(lambda: None, name="noop")
    with pytest.raises(durq.ConfigError, match="around= runs in this process"):
        app.worker(pool="processes", around=contextvars.copy_context)
