"""Text holding a NUL character (``\\x00``) that an app's codec (``Durq(codec=...)``) makes
of one value. PostgreSQL's ``text`` holds no NUL; SQLite stores it. On both backends the one
value gets a clear error where it is made (the job fails, the enqueue or the step raises)
and nothing else is lost: the other jobs of the worker's batch keep their outcomes, no job
runs twice, the worker runs on."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

import durq
import durq.testing
from durq.errors import PayloadError
from tests.support.procs import wait_for
from tests.support.threads import running

#: What a NUL codec stores for the JSON text ``"nul"`` (and reads back from it).
NUL_STORED = "\x00nul"


class NulCodec:
    """Stores every value as given, except the JSON text ``"nul"``, which it stores with a
    NUL in front (a real codec might emit one in its binary framing)."""

    def encode(self, text: str) -> str:
        return NUL_STORED if text == '"nul"' else text

    def decode(self, stored: str) -> str:
        return '"nul"' if stored == NUL_STORED else stored


def on_postgres(url: str) -> bool:
    return url.startswith("postgresql")


def test_one_result_with_a_nul_fails_that_job_only(make_any: Any, url: str) -> None:
    """50 jobs at concurrency 4, one returning a value the codec stores with a NUL. On
    PostgreSQL that one job fails with ``UnstorableOutcome`` naming the NUL; the other 49
    succeed, each body ran once, the worker runs on (a job after it succeeds). On SQLite,
    which stores the NUL, that job succeeds and its result reads back."""
    app = make_any(codec=NulCodec())
    runs: Counter[int] = Counter()
    lock = threading.Lock()

    @app.task
    def echo(i: int, value: str) -> str:
        with lock:
            runs[i] += 1
        return value

    items = [{"i": i, "value": "nul" if i == 17 else f"ok-{i}"} for i in range(50)]
    jobs = echo.enqueue_many(items)
    with running(app, concurrency=4) as w:
        wait_for(lambda: all(app.get(j.id).finished_at is not None for j in jobs), 60, 0.02)
        late = echo.enqueue(i=50, value="after")
        wait_for(lambda: app.get(late.id).state == "succeeded", 30, 0.02, "a job after it")
    assert w.exit_code == 0 and w.crash_reason is None
    assert runs == Counter(range(51)), "a body ran more than once"
    for job in jobs:
        row = app.get(job.id)
        if job.payload["i"] != 17:
            assert (row.state, row.result) == ("succeeded", job.payload["value"])
        elif on_postgres(url):
            assert (row.state, row.result, row.attempts) == ("failed", None, 1)
            assert row.errors[-1].type == "UnstorableOutcome"
            assert "NUL character" in row.errors[-1].message
            assert "PostgreSQL cannot store" in row.errors[-1].message
        else:
            assert (row.state, row.result) == ("succeeded", "nul")


def test_durq_testing_drain_fails_that_job_only(make_any: Any, url: str) -> None:
    """``durq.testing.drain`` records each outcome as the worker does: on PostgreSQL the
    NUL result fails its job (``UnstorableOutcome``) instead of raising out of the drain
    with the job left running; the next job runs."""
    app = make_any(codec=NulCodec())

    @app.task
    def echo(value: str) -> str:
        return value

    bad, good = echo.enqueue(value="nul"), echo.enqueue(value="fine")
    durq.testing.drain(app)
    assert app.get(good.id).state == "succeeded"
    row = app.get(bad.id)
    if on_postgres(url):
        assert (row.state, row.errors[-1].type) == ("failed", "UnstorableOutcome")
    else:
        assert (row.state, row.result) == ("succeeded", "nul")


def test_a_payload_with_a_nul_is_refused_at_enqueue(make_any: Any, url: str) -> None:
    """A payload the codec stores with a NUL: on PostgreSQL ``enqueue`` raises
    ``PayloadError`` naming the NUL and writes nothing (in ``enqueue_many`` none of the
    rows); SQLite stores and runs it."""
    app = make_any(codec=_PayloadNul())

    @app.task
    def echo(value: str) -> str:
        return value

    if on_postgres(url):
        with pytest.raises(PayloadError, match=r"NUL character.*PostgreSQL cannot store"):
            echo.enqueue(value="nul")
        with pytest.raises(PayloadError, match="NUL character"):
            echo.enqueue_many([{"value": "a"}, {"value": "nul"}, {"value": "b"}])
        assert app.jobs() == []
        ok = echo.enqueue(value="fine")
        assert app.get(ok.id).payload == {"value": "fine"}
    else:
        job = echo.enqueue(value="nul")
        assert app.get(job.id).payload == {"value": "nul"}


class _PayloadNul:
    """Stores a payload whose value is ``"nul"`` with a NUL in front, all else as given."""

    def encode(self, text: str) -> str:
        return "\x00" + text if '"value":"nul"' in text else text

    def decode(self, stored: str) -> str:
        return stored.removeprefix("\x00")


def test_a_step_record_with_a_nul_fails_that_step_clearly(make_any: Any, url: str) -> None:
    """``ctx.step`` whose value the codec stores with a NUL: on PostgreSQL the step raises
    ``StepResultError`` naming the NUL (its function ran, nothing was recorded), the job
    fails with that reason like any task error, other jobs run on; SQLite records it."""
    app = make_any(codec=NulCodec())

    @app.task(max_attempts=1)
    def stepper(value: str) -> str:
        return str(durq.context().step("s", lambda: value))

    bad = stepper.enqueue(value="nul")
    good = [stepper.enqueue(value=f"ok-{i}") for i in range(5)]
    with running(app, concurrency=2) as w:
        wait_for(lambda: all(app.get(j.id).finished_at is not None for j in [bad, *good]), 30)
    assert w.exit_code == 0 and w.crash_reason is None
    assert all(app.get(j.id).state == "succeeded" for j in good)
    row = app.get(bad.id)
    if on_postgres(url):
        assert row.state == "failed"
        assert row.errors[-1].type == "durq.errors.StepResultError"
        assert "NUL character" in row.errors[-1].message
    else:
        assert (row.state, row.result) == ("succeeded", "nul")


def test_progress_with_a_nul_is_stored_escaped(make_any: Any) -> None:
    """Progress is JSON durq writes itself (not through the codec): a NUL in its message
    is escaped (``\\u0000``) and reads back, on both backends."""
    app = make_any(codec=NulCodec())

    @app.task
    def report() -> str:
        assert durq.context().progress(0.5, "half\x00way")
        return "done"

    job = report.enqueue()
    with running(app, concurrency=1):
        wait_for(lambda: app.get(job.id).state == "succeeded", 30)
    assert app.get(job.id).progress == {"fraction": 0.5, "message": "half\x00way"}


class _ChainNul:
    """Stores a payload whose ``text`` is ``"nul"`` with a NUL in front (the payload a
    chain's step gets once the previous step's result is written into it)."""

    def encode(self, text: str) -> str:
        return "\x00" + text if '"text"' in text and '"nul"' in text else text

    def decode(self, stored: str) -> str:
        return stored.removeprefix("\x00")


def test_a_chain_step_whose_payload_would_hold_a_nul_fails_alone(make_any: Any, url: str) -> None:
    """Ten chains first -> second -> third; the second step's payload gets the first's
    result. One first step returns ``"nul"``, which the codec stores the second step's
    payload with a NUL. On PostgreSQL the second step of that chain fails (its payload
    could not be written; the error names the NUL), the third is cancelled after it, the
    first step's success and every other chain are committed, and the worker runs on.
    SQLite stores the payload and the chain runs to the end."""
    app = make_any(codec=_ChainNul())

    @app.task
    def first(value: str) -> str:
        return value

    @app.task
    def second(text: str) -> str:
        return f"[{text}]"

    @app.task
    def third(text: str) -> str:
        return f"<{text}>"

    chains = [
        app.chain(first.s(value="nul" if i == 3 else f"v{i}"), second.s(), third.s())
        for i in range(10)
    ]
    with running(app, concurrency=4) as w:
        ends = [c[-1] for c in chains]
        wait_for(lambda: all(app.get(j.id).finished_at is not None for j in ends), 60, 0.02)
    assert w.exit_code == 0 and w.crash_reason is None
    for i, (a, b, c) in enumerate(chains):
        value = "nul" if i == 3 else f"v{i}"
        assert (app.get(a.id).state, app.get(a.id).result) == ("succeeded", value)
        if i == 3 and on_postgres(url):
            row = app.get(b.id)
            assert row.state == "failed"
            assert row.errors[-1].type == "UnstorablePayload"
            assert "NUL character" in row.errors[-1].message
            assert app.get(c.id).state == "cancelled"
        else:
            assert app.get(c.id).result == f"<[{value}]>"
    assert app.store.stuck_waiting() == []
    # a new child of that finished first step: refused at enqueue on PostgreSQL
    late = [second.s().after(chains[3][0], pass_as="text")]
    if on_postgres(url):
        with pytest.raises(PayloadError, match="NUL character"):
            app.enqueue_graph(late)
        assert len(app.jobs()) == 30
    else:
        assert app.enqueue_graph(late)[0].payload == {"text": "nul"}
