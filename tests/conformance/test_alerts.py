"""Alerts (issue 4 item 10) on every backend: cooldown per key kept in the database, counted
not re-sent, across restarts, once under a race, hooks that fail never break the caller."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

import durq
from tests.conftest import Clock


def collect(app: durq.Durq) -> list[durq.Alert]:
    got: list[durq.Alert] = []
    app.on_alert(got.append)
    return got


def test_first_alert_is_sent_with_nothing_suppressed(app: durq.Durq, clock: Clock) -> None:
    got = collect(app)
    sent = app.alert("disk", "disk almost full", severity="error")
    assert sent is not None
    assert got == [sent]
    assert (sent.key, sent.message, sent.severity) == ("disk", "disk almost full", "error")
    assert (sent.at, sent.suppressed, sent.first_at) == (clock.now, 0, clock.now)


def test_same_key_within_cooldown_is_counted_then_reported(app: durq.Durq, clock: Clock) -> None:
    got = collect(app)
    start = clock.now
    assert app.alert("k", "one") is not None
    clock.advance(10)
    assert app.alert("k", "two") is None
    clock.advance(10)
    assert app.alert("k", "three") is None
    assert len(got) == 1
    clock.advance(599)  # 619 s after the send: past the default 600 s cooldown
    sent = app.alert("k", "four")
    assert sent is not None
    assert (sent.message, sent.suppressed, sent.first_at, sent.at) == (
        "four",
        2,
        start + 10,
        start + 619,
    )
    # the next window starts from this send, with nothing suppressed yet
    clock.advance(600)
    nxt = app.alert("k", "five")
    assert nxt is not None and nxt.suppressed == 0 and nxt.first_at == nxt.at
    assert [a.message for a in got] == ["one", "four", "five"]


def test_keys_are_independent_and_cooldown_is_per_call(app: durq.Durq, clock: Clock) -> None:
    got = collect(app)
    app.alert("a", "x")
    app.alert("b", "x")
    assert app.alert("a", "x") is None
    clock.advance(5)
    assert app.alert("a", "x", cooldown=5) is not None
    assert app.alert("a", "x", cooldown=0) is not None  # no cooldown: always sent
    assert [a.key for a in got] == ["a", "b", "a", "a"]


def test_cooldown_survives_a_restart(make: Callable[[], durq.Durq], clock: Clock) -> None:
    first = make()
    got_first = collect(first)
    first.alert("pause:q", "paused")
    first.close()
    second = make()  # a new process on the same database
    got_second = collect(second)
    assert second.alert("pause:q", "paused again") is None
    assert second.alert("pause:q", "and again") is None
    clock.advance(600)
    sent = second.alert("pause:q", "still")
    assert sent is not None and sent.suppressed == 2
    assert len(got_first) == 1 and got_second == [sent]


def test_a_failing_hook_is_logged_and_does_not_break_the_caller(
    app: durq.Durq, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[str] = []

    @app.on_alert
    def broken(alert: durq.Alert) -> None:
        raise RuntimeError("chat service down")

    @app.on_alert
    def fine(alert: durq.Alert) -> None:
        got.append(alert.key)

    with caplog.at_level(logging.WARNING, logger="durq"):
        sent = app.alert("k", "m")
    assert sent is not None
    assert got == ["k"]  # the next hook still ran
    assert any("chat service down" in r.getMessage() or r.exc_info for r in caplog.records)


def test_bad_arguments_record_nothing(app: durq.Durq) -> None:
    got = collect(app)
    for kwargs in ({"severity": "loud"}, {"cooldown": -1}, {"cooldown": float("nan")}):
        with pytest.raises(durq.ConfigError):
            app.alert("k", "m", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(durq.ConfigError):
        app.alert("", "m")
    with pytest.raises(durq.ConfigError):
        app.on_alert("not callable")  # type: ignore[type-var]
    assert app.alert("k", "m") is not None and len(got) == 1  # the key was never recorded


def test_two_instances_racing_one_key_send_once(make: Callable[[], durq.Durq]) -> None:
    """Threads on separate Durq instances (each its own connections) raise the same key at
    the same instant, over and over: each round is sent exactly once."""
    apps = [make() for _ in range(4)]
    apps[0].paused("default")  # migrate once before racing
    sent: list[durq.Alert] = []
    lock = threading.Lock()
    for dq in apps:

        @dq.on_alert
        def hook(alert: durq.Alert) -> None:
            with lock:
                sent.append(alert)

    rounds = 10
    barrier = threading.Barrier(len(apps))
    errors: list[BaseException] = []

    def go(dq: durq.Durq) -> None:
        try:
            for r in range(rounds):
                barrier.wait(30)
                dq.alert(f"race:{r}", "same moment")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(dq,)) for dq in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(a.key for a in sent) == sorted(f"race:{r}" for r in range(rounds))
    assert all(a.suppressed == 0 for a in sent)
