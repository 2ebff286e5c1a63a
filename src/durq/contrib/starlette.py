"""durq in a Starlette or FastAPI app: a lifespan that opens and closes the app's store, and
a dependency that gives a request the app.

::

    from fastapi import Depends, FastAPI
    from durq.contrib.starlette import durq_lifespan, get_durq

    app = FastAPI(lifespan=durq_lifespan(dq))

    @app.post("/signup")
    async def signup(email: str, dq: durq.Durq = Depends(get_durq)):
        job = await dq.aenqueue("send_welcome", {"email": email})
        return {"job": job.id}

For an enqueue inside the request's database transaction (the outbox), see
:mod:`durq.contrib.sqlalchemy` and docs/features/frameworks.md. Needs ``starlette``
(``durq[examples]`` or ``durq[dashboard]`` have it; FastAPI depends on it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.requests import Request

from durq.app import Durq
from durq.errors import ConfigError

#: The attribute of ``app.state`` that holds the :class:`durq.Durq`.
STATE_KEY = "durq"

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


def durq_lifespan(dq: Durq, inner: Lifespan | None = None) -> Lifespan:
    """A ``lifespan=`` for ``Starlette(...)`` / ``FastAPI(...)``.

    At startup the store is opened (and migrated) in a thread, so a wrong URL stops the
    app from starting instead of failing its first request, and ``app.state.durq`` is set;
    at shutdown the store is closed.

    Args:
        dq: the app's :class:`durq.Durq`.
        inner: the app's own lifespan, run inside this one (its state is yielded through).

    Raises:
        StoreError, ConfigError, SchemaTooNew: at startup, as :attr:`durq.Durq.store`.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        await asyncio.to_thread(lambda: dq.store)
        setattr(app.state, STATE_KEY, dq)
        try:
            if inner is None:
                yield None
            else:
                async with inner(app) as state:
                    yield state
        finally:
            await asyncio.to_thread(dq.close)

    return lifespan


def get_durq(request: Request) -> Durq:
    """The request's :class:`durq.Durq` (a FastAPI dependency: ``Depends(get_durq)``).

    Raises:
        ConfigError: the app was not started with :func:`durq_lifespan`.
    """
    dq = getattr(request.app.state, STATE_KEY, None)
    if not isinstance(dq, Durq):
        raise ConfigError("no durq app on this ASGI app: start it with lifespan=durq_lifespan(dq)")
    return dq
