"""Steps: durable execution inside one job (DESIGN §6).

``ctx.step(name, fn, *args, **kwargs)`` runs ``fn`` once per job: its result is stored as
JSON under ``(job_id, name)`` in the ``steps`` table of the job's own database, and a later
attempt of the same job (a retry, a job recovered after its worker died, ``dq.retry()``)
gets the stored result back without calling ``fn``. The write is fenced by the attempt's
lease token, like every other write a running job makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from durq.checks import check_storable
from durq.codecs import decode_with, encode_with, nul_problem
from durq.errors import ConfigError, DurqError, LeaseLost, PayloadError, StepResultError
from durq.payload import DEFAULT_PAYLOAD_LIMIT, check_structure, decode, encode

#: The longest step name accepted, in characters.
MAX_STEP_NAME = 200


class StepOwner(Protocol):
    """What a step needs of the running attempt (a :class:`durq.JobContext` is one)."""

    job_id: int
    attempt: int
    lease_token: int

    def mark_lease_lost(self) -> None: ...


class StepStore(Protocol):
    """The part of the store that steps use (both backends implement it)."""

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]: ...

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool: ...


def check_name(name: object) -> str:
    """Validate a step name.

    Raises:
        ConfigError: not a non-empty str of at most :data:`MAX_STEP_NAME` characters, or
            one with a lone surrogate or a NUL character (PostgreSQL text holds neither;
            refused on every backend alike).
    """
    if not isinstance(name, str) or not name or len(name) > MAX_STEP_NAME:
        raise ConfigError(
            f"a step name must be a non-empty str of at most {MAX_STEP_NAME} characters, "
            f"not {name!r}"
        )
    return check_storable("a step name", name)


def _encoded(ctx: StepOwner, store: StepStore, name: str, value: Any) -> tuple[str, str]:
    """A step's value as JSON (``body``) and as stored (``body`` through the app's codec):
    the same checks for :func:`run_step` and :func:`run_step_async`.

    Raises:
        StepResultError: the value is not a JSON value that comes back the same, is larger
            than the payload limit, or (PostgreSQL) its stored text holds a NUL.
    """
    ran = "the step's function ran but its result was not recorded (a later attempt would run it again)"
    try:
        check_structure(value, f"step {name!r} result")  # {1: "a"} would come back changed
        body = encode(value, what=f"step {name!r} result", limit=DEFAULT_PAYLOAD_LIMIT)
    except PayloadError as exc:
        raise StepResultError(f"job {ctx.job_id}: {exc}; {ran}") from exc
    stored = encode_with(getattr(store, "codec", None), body)
    problem = nul_problem(f"step {name!r} result", stored, getattr(store, "holds_nul", True))
    if problem is not None:  # PostgreSQL would refuse the statement: say why, here
        raise StepResultError(f"job {ctx.job_id}: {problem}; {ran}")
    return body, stored


def _recorded(store: StepStore, stored: str) -> Any:
    """A stored step record's value (decoded by the app's codec, then as JSON)."""
    return decode(decode_with(getattr(store, "codec", None), stored))


def _lost_before(ctx: StepOwner, name: str) -> LeaseLost:
    ctx.mark_lease_lost()
    return LeaseLost(
        f"job {ctx.job_id} attempt {ctx.attempt}: lease lost before step {name!r}; it was not run"
    )


def _lost_while(ctx: StepOwner, name: str) -> LeaseLost:
    ctx.mark_lease_lost()
    return LeaseLost(
        f"job {ctx.job_id} attempt {ctx.attempt}: lease lost while step {name!r} ran; "
        "its function ran but its result was not recorded"
    )


def run_step(
    ctx: StepOwner,
    store: StepStore | None,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The body of :meth:`durq.JobContext.step` (see there for the contract)."""
    check_name(name)
    if store is None:
        raise DurqError("ctx.step() needs a context made by a durq worker (it has no store)")
    if not callable(fn):
        raise ConfigError(f"step {name!r}: fn must be callable, not {fn!r}")
    stored, held = store.step_state(ctx.job_id, ctx.lease_token, name)
    if stored is not None:
        return _recorded(store, stored)
    if not held:
        raise _lost_before(ctx, name)
    body, stored = _encoded(ctx, store, name, fn(*args, **kwargs))
    if store.save_step(ctx.job_id, ctx.lease_token, name, stored):
        return decode(body)  # the JSON round trip: the same value a later attempt gets
    stored, held = store.step_state(ctx.job_id, ctx.lease_token, name)
    if held and stored is not None:  # the same name recorded first by another thread
        return _recorded(store, stored)
    raise _lost_while(ctx, name)


async def run_step_async(
    ctx: StepOwner,
    store: StepStore | None,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The body of :meth:`durq.JobContext.astep`: :func:`run_step` with every store call in
    a thread, and ``fn`` awaited when it is a coroutine function (a plain function runs in
    a thread too), so the event loop is never blocked. Records go through the app's codec
    and the same checks as :func:`run_step`'s."""
    import asyncio
    import inspect

    check_name(name)
    if store is None:
        raise DurqError("ctx.astep() needs a context made by a durq worker (it has no store)")
    if not callable(fn):
        raise ConfigError(f"step {name!r}: fn must be callable, not {fn!r}")
    stored, held = await asyncio.to_thread(store.step_state, ctx.job_id, ctx.lease_token, name)
    if stored is not None:
        return _recorded(store, stored)
    if not held:
        raise _lost_before(ctx, name)
    if inspect.iscoroutinefunction(fn):
        value = await fn(*args, **kwargs)
    else:
        value = await asyncio.to_thread(fn, *args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
    body, stored = _encoded(ctx, store, name, value)
    if await asyncio.to_thread(store.save_step, ctx.job_id, ctx.lease_token, name, stored):
        return decode(body)
    stored, held = await asyncio.to_thread(store.step_state, ctx.job_id, ctx.lease_token, name)
    if held and stored is not None:
        return _recorded(store, stored)
    raise _lost_while(ctx, name)
