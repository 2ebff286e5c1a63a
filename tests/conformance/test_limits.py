"""Limits (concurrency and rate per key, named holds) at the store level, on every backend."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlparse

import pytest

import durq
from durq.errors import ConfigError, LimitTimeout, PayloadError
from durq.limits import parse_rate
from durq.model import Claimed, Outcome
from tests.conftest import Clock

LEASE = 30.0


def host(payload: dict[str, object]) -> str:
    return urlparse(str(payload["url"])).hostname or "?"


def register(app: durq.Durq, concurrency: int = 3) -> None:
    @app.task(concurrency=concurrency, concurrency_key=host)
    def fetch(url: str) -> str:
        return url

    @app.task
    def plain(n: int = 0) -> int:
        return n

    @app.task(concurrency=2, concurrency_key="downloads")
    def download(n: int = 0) -> int:
        return n

    @app.task(rate_limit="3/s")
    def ping(n: int = 0) -> int:
        return n


def claim(app: durq.Durq, limit: int = 10, worker: str = "w1") -> list[Claimed]:
    return app.store.claim("default", sorted(app.tasks), limit, LEASE, worker)


def done(app: durq.Durq, jobs: list[Claimed]) -> None:
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded") for c in jobs]) == [
        True
    ] * len(jobs)


def hosts(app: durq.Durq, jobs: list[Claimed]) -> Counter[str]:
    payloads = [app.get(c.id).payload for c in jobs]
    return Counter(host(p) if "url" in p else "-" for p in payloads)


def usage(app: durq.Durq) -> dict[str, tuple[int, int]]:
    return {u["name"]: (u["running"], u["held"]) for u in app.limits()}


def test_a_batch_claim_takes_no_more_than_each_keys_free_slots(app: durq.Durq) -> None:
    register(app)
    fetch = app.tasks["fetch"]
    for i in range(10):
        fetch.enqueue(url=f"https://a.example/{i}")
    for i in range(5):
        fetch.enqueue(url=f"https://b.example/{i}")
    first = claim(app, limit=50)
    assert hosts(app, first) == {"a.example": 3, "b.example": 3}
    assert claim(app, limit=50) == []  # both keys full
    assert usage(app) == {"a.example": (3, 0), "b.example": (3, 0)}
    # one a-job finishes: exactly one more a-job may start
    a_jobs = [c for c in first if host(app.get(c.id).payload) == "a.example"]
    done(app, a_jobs[:1])
    again = claim(app, limit=50)
    assert hosts(app, again) == {"a.example": 1}
    # a retry and a failure free their slots too
    app.store.finish([Outcome(a_jobs[1].id, a_jobs[1].lease_token, "retry")])
    app.store.finish([Outcome(a_jobs[2].id, a_jobs[2].lease_token, "failed")])
    assert hosts(app, claim(app, limit=50)) == {"a.example": 2}
    assert claim(app, limit=50) == []


def test_claims_follow_priority_within_a_key(app: durq.Durq) -> None:
    register(app, concurrency=1)
    fetch = app.tasks["fetch"]
    fetch.enqueue(url="https://a.example/late")
    urgent = fetch.options(priority=-1).enqueue(url="https://a.example/urgent")
    (c,) = claim(app)
    assert c.id == urgent.id


def test_a_full_key_does_not_block_other_jobs_behind_it(app: durq.Durq) -> None:
    register(app, concurrency=2)
    fetch = app.tasks["fetch"]
    fetch.enqueue_many([{"url": f"https://a.example/{i}"} for i in range(300)])
    b = fetch.enqueue(url="https://b.example/x")
    p = app.tasks["plain"].enqueue(n=1)
    first = claim(app, limit=3)
    assert hosts(app, first)["a.example"] == 2
    rest = claim(app, limit=10)
    assert {c.id for c in first + rest} >= {b.id, p.id}
    assert hosts(app, first + rest)["a.example"] == 2
    assert claim(app, limit=10) == []


def test_named_limit_is_shared_by_holds_and_jobs(app: durq.Durq) -> None:
    register(app)
    download = app.tasks["download"]
    for i in range(5):
        download.enqueue(n=i)
    with app.limit("downloads", 2, timeout=0):
        assert len(claim(app)) == 1  # one slot left of 2
        assert usage(app)["downloads"] == (1, 1)
        with pytest.raises(LimitTimeout), app.limit("downloads", 2, timeout=0):
            pass
    assert usage(app)["downloads"] == (1, 0)
    assert len(claim(app)) == 1
    assert claim(app) == []
    with pytest.raises(LimitTimeout), app.limit("downloads", 2, timeout=0.05):
        pass
    # a larger limit on the same key lets the hold in (each side checks its own number)
    with app.limit("downloads", 3, timeout=0) as hold:
        assert hold.id is not None and usage(app)["downloads"] == (2, 1)


def test_a_hold_past_its_lease_frees_the_slot(app: durq.Durq, clock: Clock) -> None:
    register(app)
    store = app.store
    first = store.acquire_hold("k", 1, 5.0, "holder-1")
    assert first is not None
    assert store.acquire_hold("k", 1, 5.0, "holder-2") is None
    clock.advance(3)
    assert store.extend_hold(first, 5.0)  # now lasts until +8
    clock.advance(4)
    assert store.acquire_hold("k", 1, 5.0, "holder-2") is None
    clock.advance(2)  # past the extended lease: the crashed holder's slot is free again
    second = store.acquire_hold("k", 1, 5.0, "holder-2")
    assert second is not None and second != first
    assert not store.extend_hold(first, 5.0)  # the first holder learns it lost the slot
    assert not store.release_hold(first)
    assert store.release_hold(second)
    assert not store.release_hold(second)


def test_expired_holds_do_not_count_against_jobs(app: durq.Durq, clock: Clock) -> None:
    register(app)
    for i in range(3):
        app.tasks["download"].enqueue(n=i)
    assert app.store.acquire_hold("downloads", 2, 5.0, "h") is not None
    assert app.store.acquire_hold("downloads", 2, 5.0, "h") is not None
    assert claim(app) == []
    clock.advance(6)
    assert len(claim(app)) == 2


def test_rate_limit_counts_starts_in_a_sliding_window(app: durq.Durq, clock: Clock) -> None:
    register(app)
    ping = app.tasks["ping"]
    for i in range(10):
        ping.enqueue(n=i)
    first = claim(app)
    assert len(first) == 3
    done(app, first)  # finishing does not give starts back
    assert claim(app) == []
    clock.advance(0.5)
    assert claim(app) == []
    clock.advance(0.51)  # the first three starts are now more than 1 s old
    second = claim(app, limit=2)
    assert len(second) == 2
    clock.advance(0.5)
    assert len(claim(app)) == 1  # 2 in the window, 1 left
    clock.advance(0.51)
    assert len(claim(app)) == 2  # the two from +1.01 aged out; one at +1.51 still counts
    assert claim(app) == []


def test_a_retried_job_counts_as_a_new_start(app: durq.Durq, clock: Clock) -> None:
    register(app)
    ping = app.tasks["ping"]
    for i in range(5):
        ping.enqueue(n=i)
    (a,) = claim(app, limit=1)
    app.store.finish([Outcome(a.id, a.lease_token, "retry")])
    assert len(claim(app)) == 2  # 1 start already used in this second
    assert claim(app) == []


def test_reaped_jobs_free_their_slots(app: durq.Durq, clock: Clock) -> None:
    register(app)
    for i in range(4):
        app.tasks["download"].enqueue(n=i)
    assert len(claim(app)) == 2
    assert claim(app) == []
    clock.advance(LEASE + 1)
    assert app.store.reap().recovered == 2
    assert len(claim(app)) == 2


def test_enqueue_many_keyed_and_outbox_rows_carry_their_limit(app: durq.Durq) -> None:
    register(app, concurrency=1)
    fetch = app.tasks["fetch"]
    fetch.enqueue_many(
        [{"url": "https://a.example/1"}, {"url": "https://a.example/2"}],
        keys=["k1", None],
    )
    again = fetch.options(key="k1").enqueue(url="https://a.example/1")
    assert again.state == "queued"
    assert usage(app) == {"a.example": (0, 0)}
    assert [u["queued"] for u in app.limits()] == [2]
    assert len(claim(app)) == 1


def test_many_claimers_at_once_never_exceed_the_limit(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    register(app, concurrency=3)
    app.tasks["fetch"].enqueue_many([{"url": "https://a.example/x"} for _ in range(120)])
    lock = threading.Lock()
    running = 0
    peak = 0
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        nonlocal running, peak
        dq = make()
        register(dq, concurrency=3)
        try:
            while True:
                got = dq.store.claim("default", ["fetch"], 4, LEASE, name)
                if got:
                    with lock:  # counted after the claim committed ...
                        running += len(got)
                        peak = max(peak, running)
                    time.sleep(0.005)
                    with lock:  # ... and uncounted before the finish commits
                        running -= len(got)
                    done(dq, got)
                elif not dq.store.has_pending(["default"], ["fetch"]):
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert 1 <= peak <= 3
    assert len(app.jobs(state="succeeded", limit=500)) == 120


def test_bad_limit_settings_are_refused(app: durq.Durq) -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        app.task(concurrency=0)(lambda: None)
    with pytest.raises(ConfigError, match="rate_limit"):
        app.task(name="r", rate_limit="10/day")(lambda: None)
    with pytest.raises(ConfigError, match="needs concurrency"):
        app.task(name="k", concurrency_key="x")(lambda: None)
    with pytest.raises(ConfigError):
        app.limit("", 3)
    with pytest.raises(ConfigError):
        app.limit("x", 0)


def test_a_failing_key_function_writes_nothing(app: durq.Durq) -> None:
    @app.task(concurrency=1, concurrency_key=lambda p: p["host"])
    def by_host(**kwargs: object) -> None:
        return None

    @app.task(concurrency=1, concurrency_key=lambda p: p.get("n"))
    def by_n(**kwargs: object) -> None:
        return None

    with pytest.raises(PayloadError, match=r"concurrency_key of by_host failed.*KeyError"):
        by_host.enqueue(url="x")
    with pytest.raises(PayloadError, match="concurrency_key of by_n returned"):
        by_n.enqueue(n=3)
    with pytest.raises(PayloadError):
        by_n.enqueue_many([{"n": "ok"}, {"n": 4}])
    assert app.jobs() == []


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("10/s", (10, 1.0)), ("1/sec", (1, 1.0)), ("5/m", (5, 60.0)), ("5/minute", (5, 60.0)),
     ("100/h", (100, 3600.0)), ("7/hour", (7, 3600.0))],
)  # fmt: skip
def test_parse_rate(text: str, parsed: tuple[int, float]) -> None:
    assert parse_rate(text) == parsed


@pytest.mark.parametrize(
    "text", ["", "10", "/s", "0/s", "-1/s", "1.5/s", "10/d", "10 / s", "10/S", "1e3/s", "10/ms"]
)
def test_parse_rate_is_strict(text: str) -> None:
    with pytest.raises(ConfigError, match="rate_limit"):
        parse_rate(text)
