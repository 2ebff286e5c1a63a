"""Backoff policies and Retry-After parsing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.message
import math
import time
import urllib.error
from collections.abc import Callable
from email.utils import format_datetime

import httpx
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from durq.errors import ConfigError, Transient
from durq.retry import (
    DEFAULT_BACKOFF,
    MAX_RETRY_AFTER,
    Backoff,
    Constant,
    Exponential,
    FromCallable,
    Tiers,
    as_backoff,
    constant,
    exponential,
    parse_retry_after,
    retry_after_of,
    tiers,
)

NOW = 1_700_000_000.0  # a whole second, so HTTP dates (1 s resolution) round-trip exactly


def caught(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:
        return exc
    pytest.fail(f"{fn} raised nothing")


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        raise outer from inner
    except BaseException as exc:
        return exc


def http_date(epoch: float) -> str:
    return format_datetime(dt.datetime.fromtimestamp(epoch, tz=dt.UTC), usegmt=True)


def http_error(code: int, retry_after: str | None) -> urllib.error.HTTPError:
    headers = email.message.Message()
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return urllib.error.HTTPError("http://example.test/", code, "status", headers, None)


# ---- policies --------------------------------------------------------------------------------


def test_tiers_repeat_the_last() -> None:
    policy = tiers([5, 25, 120])
    assert [policy.delay(n, None) for n in range(1, 7)] == [5, 25, 120, 120, 120, 120]
    assert policy.delay(0, None) == 5  # below 1 counts as 1
    assert policy.seconds == (5.0, 25.0, 120.0)
    assert Tiers([1, 2]).seconds == (1.0, 2.0)  # type: ignore[arg-type]


def test_exponential_grows_and_caps() -> None:
    policy = exponential(base=5, factor=4, cap=900, jitter=0)
    assert [policy.delay(n, None) for n in range(1, 7)] == [5, 20, 80, 320, 900, 900]
    assert policy.delay(100_000, None) == 900  # no OverflowError
    assert exponential(base=0, jitter=0.5).delay(100_000, None) == 0
    assert exponential(base=2, factor=1, jitter=0).delay(50, None) == 2


def test_default_backoff_is_the_design_default() -> None:
    assert as_backoff(None) is DEFAULT_BACKOFF
    assert Exponential(base=5, factor=4, cap=900, jitter=0.1) == DEFAULT_BACKOFF


@settings(database=None, max_examples=300)
@given(
    base=st.floats(0, 1000),
    factor=st.floats(1, 10),
    cap=st.floats(0, 5000),
    jitter=st.floats(0, 1),
    attempt=st.integers(1, 60),
)
def test_exponential_jitter_bounds(
    base: float, factor: float, cap: float, jitter: float, attempt: int
) -> None:
    delay = exponential(base=base, factor=factor, cap=cap, jitter=jitter).delay(attempt, None)
    plain = min(cap, base * factor ** (attempt - 1))
    assert 0 <= delay <= cap
    assert plain * (1 - jitter) * (1 - 1e-9) <= delay <= plain * (1 + jitter) * (1 + 1e-9)


def test_jitter_spreads_both_ways() -> None:
    policy = exponential(base=100, factor=1, cap=1000, jitter=0.5)
    samples = [policy.delay(1, None) for _ in range(400)]
    assert len(set(samples)) > 300
    assert all(50 <= s <= 150 for s in samples)
    assert min(samples) < 75 and max(samples) > 125
    assert 90 < sum(samples) / len(samples) < 110
    at_cap = [
        exponential(base=100, factor=2, cap=200, jitter=0.5).delay(9, None) for _ in range(100)
    ]
    assert all(100 <= s <= 200 for s in at_cap) and min(at_cap) < 200


def test_constant() -> None:
    policy = constant(7)
    assert [policy.delay(n, ValueError()) for n in (1, 2, 50)] == [7.0, 7.0, 7.0]
    assert policy == Constant(7.0)


def test_callable_backoff_gets_attempt_and_error() -> None:
    calls: list[tuple[int, BaseException | None]] = []
    error = ValueError("x")

    def fn(attempt: int, err: BaseException | None) -> float:
        calls.append((attempt, err))
        return attempt * 1.5

    policy = as_backoff(fn)
    assert isinstance(policy, FromCallable)
    assert policy.delay(3, error) == 4.5
    assert calls == [(3, error)]
    assert as_backoff(lambda a, e: -3).delay(1, None) == 0.0


@pytest.mark.parametrize("result", ["soon", None, math.nan, math.inf, True])
def test_callable_returning_garbage_raises(result: object) -> None:
    policy = as_backoff(lambda a, e: result)  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError):
        policy.delay(1, None)


def test_as_backoff_keeps_policies_and_duck_types() -> None:
    policy = tiers([1])

    class Fixed:
        def delay(self, attempt: int, error: BaseException | None) -> float:
            return 42.0

    fixed = Fixed()
    assert as_backoff(policy) is policy
    assert as_backoff(fixed) is fixed
    for obj in (policy, fixed, constant(1), exponential(), FromCallable(lambda a, e: 1.0)):
        assert isinstance(obj, Backoff)


@pytest.mark.parametrize(
    "make",
    [
        lambda: tiers([]),
        lambda: tiers([5, -1]),
        lambda: tiers([math.nan]),
        lambda: tiers(["5"]),  # type: ignore[list-item]
        lambda: tiers(5),  # type: ignore[arg-type]
        lambda: Tiers(()),
        lambda: exponential(base=-1),
        lambda: exponential(factor=0.5),
        lambda: exponential(cap=-1),
        lambda: exponential(cap=math.inf),
        lambda: exponential(jitter=1.5),
        lambda: exponential(jitter=-0.1),
        lambda: exponential(base=math.nan),
        lambda: Exponential(factor="4"),  # type: ignore[arg-type]
        lambda: constant(-1),
        lambda: constant(math.inf),
        lambda: Constant(True),
        lambda: FromCallable(5),  # type: ignore[arg-type]
        lambda: as_backoff(42),  # type: ignore[arg-type]
        lambda: as_backoff("5"),  # type: ignore[arg-type]
        lambda: as_backoff(Tiers),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_raise_config_error(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigError):
        make()
    assert issubclass(ConfigError, ValueError)


def test_policies_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        constant(1).seconds = 2  # type: ignore[misc]


# ---- Retry-After -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        (b"30", 30.0),
        ("2.5", 2.5),
        (1.5, 1.5),
        (0, 0.0),
        (dt.timedelta(seconds=5), 5.0),
        (http_date(NOW + 30), 30.0),
        (http_date(NOW - 3600), 0.0),
        (dt.datetime.fromtimestamp(NOW + 10, tz=dt.UTC), 10.0),
        (dt.datetime.fromtimestamp(NOW + 10, tz=dt.UTC).replace(tzinfo=None), 10.0),  # naive=UTC
    ],
)
def test_parse_retry_after(value: object, expected: float) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    "value",
    [
        *("soon", "", "-5", "1e3", "nan", "inf", "9" * 400, "Wed, 32 Foo 2015 07:28:00 GMT"),
        *(None, object(), True, -1, math.nan, math.inf, dt.timedelta(seconds=-1)),
    ],
)
def test_parse_retry_after_garbage(value: object) -> None:
    assert parse_retry_after(value, NOW) is None


def test_parse_retry_after_with_the_real_clock() -> None:
    now = time.time()
    seconds = parse_retry_after(http_date(now + 30), now)
    assert seconds is not None and 29 < seconds <= 30  # HTTP dates drop the fraction


def test_retry_after_of_transient_and_through_a_chain() -> None:
    assert retry_after_of(Transient("later", retry_after=12), NOW) == 12.0
    assert retry_after_of(Transient("later"), NOW) is None
    assert retry_after_of(chained(RuntimeError(), Transient("x", retry_after=7)), NOW) == 7.0
    outer_first = chained(Transient("a", retry_after=3), Transient("b", retry_after=9))
    assert retry_after_of(outer_first, NOW) == 3.0
    assert retry_after_of(ExceptionGroup("g", [ValueError(), http_error(429, "4")]), NOW) == 4.0


def test_retry_after_of_urllib_http_errors() -> None:
    assert retry_after_of(http_error(429, "42"), NOW) == 42.0
    assert retry_after_of(http_error(503, http_date(NOW + 60)), NOW) == 60.0
    assert retry_after_of(http_error(404, "42"), NOW) is None  # only 429/503 count
    assert retry_after_of(http_error(429, None), NOW) is None
    garbage_then_good = chained(http_error(429, "soon"), Transient("x", retry_after=5))
    assert retry_after_of(garbage_then_good, NOW) == 5.0


def test_retry_after_of_requests_and_httpx() -> None:
    response = requests.Response()
    response.status_code = 429
    response.url = "http://example.test/"
    response.headers["Retry-After"] = "17"
    assert retry_after_of(caught(response.raise_for_status), NOW) == 17.0
    request = httpx.Request("GET", "http://example.test/")
    for status, expected in ((503, 8.0), (500, None)):
        reply = httpx.Response(status, headers={"retry-after": "8"}, request=request)
        assert retry_after_of(caught(reply.raise_for_status), NOW) == expected


def test_retry_after_of_depth_limit_and_cycles() -> None:
    def chain_of(depth: int) -> BaseException:
        exc: BaseException = Transient("deep", retry_after=2)
        for level in range(depth):
            exc = chained(RuntimeError(f"level {level}"), exc)
        return exc

    assert retry_after_of(chain_of(16), NOW) == 2.0
    assert retry_after_of(chain_of(17), NOW) is None
    err = RuntimeError("me")
    try:
        raise err from err
    except RuntimeError:
        pass
    assert retry_after_of(err, NOW) is None


def test_max_retry_after_is_an_hour() -> None:
    assert MAX_RETRY_AFTER == 3600.0
    huge = parse_retry_after("86400", NOW)
    assert huge == 86400.0  # not capped here; callers apply min(huge, MAX_RETRY_AFTER)
