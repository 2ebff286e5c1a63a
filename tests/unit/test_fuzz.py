"""Hypothesis fuzzing of the payload path, on both backends.

The property: ``enqueue()`` either raises :class:`durq.PayloadError` naming the problem and
stores nothing, or stores the job, and both ``dq.get()`` and the worker's own decoding step
(``decode_payload``) give back exactly the payload, with tuples turned into lists (the
promise in ``durq.payload.encode_payload``'s docstring).

The oracle below is written from the documented rules, not from durq's code: JSON values
(str of any code points, int up to 4300 digits, finite float, bool, None, lists/tuples,
dicts with str keys at every level), nested at most ``MAX_DEPTH`` levels, encoded in at
most ``payload_limit`` bytes.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import durq
from durq.payload import MAX_DEPTH, decode_payload

LIMIT = 4096  # bytes; small, so that "too large" is reached without megabytes per example


class Custom:
    def __repr__(self) -> str:
        return "Custom()"


class TooLong(int):
    """An int over Python's 4300-digit int-to-str limit, with a repr that says so."""

    def __repr__(self) -> str:
        return f"<int of {self.bit_length()} bits>"


def bad_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just(math.nan),
        st.just(math.inf),
        st.just(-math.inf),
        st.binary(max_size=8),  # bytes, including non-UTF-8 ones
        st.builds(bytearray, st.binary(max_size=4)),
        st.frozensets(st.integers(), max_size=3),
        st.sets(st.integers(), max_size=3),
        st.just(Custom()),
        st.complex_numbers(allow_nan=False, max_magnitude=10),
        st.builds(lambda: TooLong(10**4300)),  # over Python's int-to-str limit
    )


def good_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from([2**63, -(2**64) - 1, 10**4299, -(10**4299)]),  # big ints
        st.floats(allow_nan=False, allow_infinity=False),
        # any code points: lone surrogates, NUL, astral characters
        st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=20),
        st.sampled_from(["\x00", "\udc80", "\ud800", "a\x00b\udfff", "\U0001f600"]),
    )


def keys() -> st.SearchStrategy[Any]:
    good = st.text(max_size=8) | st.sampled_from(["\x00", "\udc80", ""])
    bad = st.one_of(
        st.integers(-3, 3), st.floats(allow_nan=False), st.booleans(), st.none(), st.tuples()
    )
    return st.one_of(good, good, good, bad)


class Nest(list):  # type: ignore[type-arg]
    """A deeply nested value whose repr stays short (Hypothesis prints failing examples)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def __repr__(self) -> str:
        return f"<{depth_of(self)} levels>"


def nested(depth: int, leaf: Any, container: str) -> Any:
    value = leaf
    for i in range(depth - 1):
        value = [value] if container == "list" or i % 2 else {"k": value}
    return Nest([value]) if depth else value


values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(good_scalars(), good_scalars(), good_scalars(), bad_scalars()),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(keys(), children, max_size=4),
    ),
    max_leaves=12,
)

deep: st.SearchStrategy[Any] = st.builds(
    nested,
    st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3) | st.integers(0, 1200),
    good_scalars(),
    st.sampled_from(["list", "mixed"]),
)

huge: st.SearchStrategy[Any] = st.builds(
    lambda n, ch: ch * n, st.integers(LIMIT - 40, LIMIT + 40), st.sampled_from(["x", "\udc80"])
)

payloads: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(st.text(max_size=8), values | deep | huge, max_size=4),
    st.dictionaries(keys(), values, max_size=3),  # non-str keys at the top level too
    values,  # often not a dict at all
)


class Refused(Exception):
    pass


def depth_of(value: Any) -> int:
    """Levels of containers: 0 for a scalar, 1 for ``[]`` or ``{"a": 1}`` (iteratively)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def expected(payload: Any) -> Any:
    """What a worker must receive, or raise Refused for what must be refused."""

    def norm(value: Any) -> Any:
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int):
            try:
                str(int(value))  # int(): a subclass's own __repr__ (TooLong's) would hide it
            except ValueError:
                raise Refused("int too long") from None
            return int(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise Refused("nan/inf")
            return value
        if isinstance(value, list | tuple):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise Refused("non-str key")
            return {k: norm(v) for k, v in value.items()}
        raise Refused(type(value).__name__)

    if payload is None:
        payload = {}  # documented: no payload means no arguments
    if not isinstance(payload, dict):
        raise Refused("not a dict")
    # the payload dict itself is level 0: MAX_DEPTH counts the levels below it
    if depth_of(payload) - 1 > MAX_DEPTH:
        raise Refused("too deep")
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # the oracle's own recursion, not durq's
    try:
        value = norm(payload)
        size = len(json.dumps(value, separators=(",", ":")))
    finally:
        sys.setrecursionlimit(old)
    if size > LIMIT:
        raise Refused("too large")
    return value


def count(app: durq.Durq) -> int:
    return len(app.jobs(limit=100_000))


def fuzz(app: durq.Durq, examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(payload=payloads)
    @example(payload={"a": (1, (2, 3)), "b": {"\x00": "\udc80"}})
    @example(payload={"a": {1: "x", "1": "y"}})  # JSON would merge these keys
    @example(payload={"a": nested(MAX_DEPTH, 1, "list")})
    @example(payload={"a": nested(MAX_DEPTH + 1, 1, "list")})
    @example(payload={"a": 10**4299, "b": -(2**200), "c": -0.0, "d": 1e308})
    @example(payload={"a": b"\xff\xfe"})
    @example(payload={"a": "x" * (LIMIT + 1)})
    def check(payload: Any) -> None:
        stored = count(app)
        try:
            want = expected(payload)
        except Refused as why:
            with pytest.raises(durq.PayloadError) as info:
                app.enqueue("t", payload)
            message = str(info.value)
            assert message.startswith(("payload", "meta")), message
            assert count(app) == stored, f"refused ({why}) but a row was written"
            return
        job = app.enqueue("t", payload)
        assert count(app) == stored + 1
        got = app.get(job.id)
        assert got.payload == want
        record = app.store.get(job.id)
        assert record is not None
        assert decode_payload(record.payload) == want  # what a worker's executor receives

    check()


def test_payload_fuzz_sqlite(make_app) -> None:
    fuzz(make_app(payload_limit=LIMIT), examples=150)


def test_payload_fuzz_postgres(pg_url: str) -> None:
    app = durq.Durq(pg_url, payload_limit=LIMIT)
    try:
        fuzz(app, examples=40)
    finally:
        app.close()


@pytest.mark.parametrize("where", ["meta"])
def test_meta_with_a_non_str_key_is_refused_and_stores_nothing(make_app, where: str) -> None:
    app = make_app()
    with pytest.raises(durq.PayloadError, match=r"meta keys must be str.*meta\['tags'\]"):
        app.enqueue("t", {}, meta={"tags": {2: "b"}})
    assert app.jobs() == []
