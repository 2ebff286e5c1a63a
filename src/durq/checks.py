"""Defaults, bounds and argument checks shared by the Durq facade (app.py) and its feature
mixins (durq/facade/). A leaf module: it imports nothing of durq but errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from durq.errors import ConfigError, PayloadError

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 3

#: Bounds on enqueue options, so that a value cannot overflow the store's integer columns.
PRIORITY_LIMIT = 2**31 - 1
MAX_ATTEMPTS_LIMIT = 1_000_000
MAX_DELAY = 100 * 365 * 86400.0  # a hundred years, in seconds
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z
#: The largest count both backends store in their integer columns (PostgreSQL ``integer``).
INT32_MAX = 2**31 - 1
#: The longest wait durq stores for a task's timeout, a Retry-After cap or a retry's delay
#: (ten years, in seconds): a longer one is a ConfigError (options) or cut to it, with a
#: note in the attempt's error (a delay a task asked for at run time).
MAX_WAIT = 10 * 365 * 86400.0
#: The most threads a worker runs (``concurrency`` with the thread pool)...
MAX_THREADS = 10_000
#: ...and the most child processes (``concurrency`` with ``pool="processes"``).
MAX_CHILDREN = 512


def check_storable(what: str, value: str) -> str:
    """``value`` when both backends store it as given: valid Unicode (no lone surrogate,
    which cannot be encoded as UTF-8) and no NUL character (PostgreSQL's text holds none;
    refused on SQLite too, so that both backends agree).

    Raises:
        ConfigError: naming ``what`` and what was wrong.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} must be valid Unicode text (no lone surrogates): {value!r}"
        ) from None
    if "\x00" in value:
        raise ConfigError(f"{what} must not contain a NUL character: {value!r}")
    return value


def _check_name(what: str, value: object, longest: int = 200) -> str:
    if not isinstance(value, str) or not value or len(value) > longest:
        raise ConfigError(
            f"{what} must be a non-empty str of at most {longest} characters, not {value!r}"
        )
    return check_storable(what, value)


def _check_text(what: str, value: object) -> None:
    """A filter value the database can hold: a str without lone surrogates or NUL."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a str, not {type(value).__name__}")
    check_storable(what, value)


def _check_int(what: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{what} must be an int from {low} to {high}, not {value!r}")


def _check_number(
    what: str, value: object, low: float, high: float, *, above: bool = False, unit: str = "s"
) -> float:
    """A finite int or float (never a bool, a str or NaN) from ``low`` (excluded when
    ``above``) to ``high``; returns it as a float.

    Raises:
        ConfigError: naming ``what`` and the allowed range.
    """
    ok = _is_number(value) and (low < value if above else low <= value) and value <= high  # type: ignore[operator]
    if not ok:
        lower = f"above {low:g}" if above else f"from {low:g}"
        raise ConfigError(f"{what} must be a number {lower} to {high:g} {unit}, not {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_task_options(
    *,
    max_attempts: object,
    priority: object,
    timeout: object,
    max_snoozes: object,
    max_retry_after: object,
) -> None:
    """The stored and timed options of a task, in ranges both backends hold.

    Raises:
        ConfigError: naming the option and its range: ``max_attempts`` an int from 1 to
            :data:`MAX_ATTEMPTS_LIMIT`, ``priority`` an int within +/- :data:`PRIORITY_LIMIT`,
            ``max_snoozes`` an int from 0 to :data:`INT32_MAX`, ``timeout`` None or seconds
            above 0 up to :data:`MAX_WAIT`, ``max_retry_after`` None or seconds from 0 to
            :data:`MAX_WAIT`.
    """
    _check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
    _check_int("priority", priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
    _check_int("max_snoozes", max_snoozes, 0, INT32_MAX)
    if timeout is not None:
        _check_number("timeout", timeout, 0, MAX_WAIT, above=True)
    if max_retry_after is not None:
        _check_number("max_retry_after", max_retry_after, 0, MAX_WAIT)


def _as_id(what: str, value: object) -> int:
    """A row id from the caller: ConfigError unless it is an integer (an int, or text or a
    float holding one); one outside the 64-bit range becomes -1, which no row has, so the
    lookup reports it not found instead of the driver raising OverflowError."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be an int, not {value!r}")
    try:
        number = int(value)  # type: ignore[call-overload]
        if isinstance(value, float) and number != value:
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be an int, not {value!r}") from None
    return number if -(2**63) <= number < 2**63 else -1


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _as_dict(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    try:
        return dict(value)
    except Exception as exc:  # noqa: BLE001 - a user Mapping may fail in any way
        raise PayloadError(
            f"{what} could not be read as a dict: {type(exc).__name__}: {exc}"
        ) from None


def _point_in_time(what: str, value: object) -> float | None:
    """A point in time given as epoch seconds or a timezone-aware datetime (None stays None).

    Raises:
        ConfigError: a naive datetime, or not a number of epoch seconds in range.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(
                f"{what} must be timezone-aware (e.g. datetime.now(timezone.utc)), or epoch seconds"
            )
        return value.timestamp()
    if not (_is_number(value) and 0 <= value <= MAX_EPOCH):  # type: ignore[operator]
        raise ConfigError(f"{what} must be epoch seconds or a datetime, not {value!r}")
    return float(value)  # type: ignore[arg-type]


def _check_seconds(what: str, value: object) -> None:
    """A duration option: None, or a number of seconds above 0 and at most MAX_DELAY."""
    if value is not None and not (_is_number(value) and 0 < value <= MAX_DELAY):  # type: ignore[operator]
        raise ConfigError(
            f"{what} must be a number of seconds above 0 and at most {MAX_DELAY:.0f}, not {value!r}"
        )


def check_worker_sizes(
    *,
    pool: object,
    concurrency: object,
    prefetch: object,
    free_requeues: object,
    max_jobs_per_child: object,
    max_memory_per_child: object,
) -> None:
    """The worker's counts and sizes, in ranges that can run (a thread or a child each).

    Raises:
        ConfigError: naming the option and its range: ``pool`` not ``"threads"`` or
            ``"processes"``; ``concurrency`` not an int from 1 to :data:`MAX_THREADS`
            (threads) or :data:`MAX_CHILDREN` (processes); ``prefetch`` not None or an
            int from 0 to 1,000,000; ``free_requeues`` not an int from 0 to 1,000;
            ``max_jobs_per_child`` not None or an int from 1 to :data:`INT32_MAX`;
            ``max_memory_per_child`` not None or a number of MB above 0 (up to 2**30).
    """
    if pool not in ("threads", "processes"):
        raise ConfigError(f"pool must be 'threads' or 'processes', not {pool!r}")
    most = MAX_CHILDREN if pool == "processes" else MAX_THREADS
    _check_int(f"concurrency (pool={pool!r})", concurrency, 1, most)
    if prefetch is not None:
        _check_int("prefetch", prefetch, 0, 1_000_000)
    _check_int("free_requeues", free_requeues, 0, 1000)
    if max_jobs_per_child is not None:
        _check_int("max_jobs_per_child", max_jobs_per_child, 1, INT32_MAX)
    if max_memory_per_child is not None:
        _check_number("max_memory_per_child", max_memory_per_child, 0, 2**30, above=True, unit="MB")


def check_worker_timing(
    *,
    lease: object,
    heartbeat_interval: object,
    grace: object,
    reap_interval: object,
    poll_interval: object,
    idle_claim_interval: object,
) -> None:
    """Refuse worker settings that cannot work, before anything starts.

    A lease must be a finite number of seconds above 0 (at most :data:`MAX_DELAY`): ``inf``
    cannot be added to a time (the heartbeat crashed with ``OverflowError``). The heartbeat
    must come at most every third of the lease, the rule of thumb of Sidekiq, Oban and
    River (a lease survives two missed heartbeats): ``--lease 1 --heartbeat 3`` let every
    lease expire mid-run, so healthy workers ran each job again until its attempts ran out.
    ``grace`` is finite and >= 0; the intervals are finite and above 0 (None: the default).

    Raises:
        ConfigError: the first setting that cannot work, saying what would fit.
    """
    if not (_is_number(lease) and 0 < lease <= MAX_DELAY):  # type: ignore[operator]
        raise ConfigError(
            f"lease must be a finite number of seconds above 0 (at most {MAX_DELAY:.0f}), "
            f"not {lease!r}"
        )
    most = float(lease) / 3  # type: ignore[arg-type]
    if heartbeat_interval is not None:
        if not (_is_number(heartbeat_interval) and heartbeat_interval > 0):  # type: ignore[operator]
            raise ConfigError(
                f"heartbeat interval must be a finite number of seconds above 0, "
                f"not {heartbeat_interval!r}"
            )
        if heartbeat_interval > most * (1 + 1e-9):  # type: ignore[operator]
            raise ConfigError(
                f"heartbeat interval {heartbeat_interval:g} s is over a third of the lease "
                f"({lease:g} s): the lease would expire between heartbeats and healthy "
                f"workers would run jobs again; use a heartbeat of at most {most:g} s, or a "
                f"lease of at least {3 * heartbeat_interval:g} s"  # type: ignore[operator]
            )
    if not (_is_number(grace) and 0 <= grace <= MAX_DELAY):  # type: ignore[operator]
        raise ConfigError(
            f"grace must be a finite number of seconds >= 0 (at most {MAX_DELAY:.0f}), "
            f"not {grace!r}"
        )
    intervals = {
        "reap interval": reap_interval,
        "poll interval": poll_interval,
        "idle claim interval": idle_claim_interval,
    }
    for what, value in intervals.items():
        if value is not None and not (_is_number(value) and 0 < value <= MAX_DELAY):  # type: ignore[operator]
            raise ConfigError(f"{what} must be a finite number of seconds above 0, not {value!r}")
