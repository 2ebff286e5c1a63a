"""A batch of outcomes, as the claimer hands it to the store, on every backend: each row is
fenced by its own lease token, and ``applied`` says exactly which rows were written.

SQLite writes a batch's successes in one statement (``FINISH_SUCCEEDED_MANY``: the rows go
in as one JSON array), PostgreSQL every outcome in one statement (``unnest``); these tests
attack both: stale tokens beside fresh ones, one job twice in one batch (an attempt whose
lease went, and the attempt that replaced it), and results that a JSON round trip could
change.
"""

from __future__ import annotations

import json

import pytest

import durq
from durq.codecs import Encrypted
from durq.model import AttemptError, Claimed, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=5)
    def work(n: int = 0) -> int:
        return n


def claim(app: durq.Durq, limit: int = 100) -> list[Claimed]:
    return app.store.claim("default", ["work"], limit, LEASE, "w1")


def err(attempt: int) -> AttemptError:
    return AttemptError(attempt, 0.0, "ValueError", "boom", "", "transient")


def stale_and_fresh(app: durq.Durq, clock: Clock, n: int) -> tuple[list[Claimed], list[Claimed]]:
    """``n`` jobs claimed twice: the first claims' leases lapsed and were reaped, so their
    tokens are stale; the second claims hold. Returns (stale, fresh), by job id."""
    for i in range(n):
        app.tasks["work"].enqueue(n=i)
    old = sorted(claim(app), key=lambda c: c.id)
    clock.advance(LEASE + 1)
    assert app.store.reap().recovered == n
    new = sorted(claim(app), key=lambda c: c.id)
    assert [c.id for c in new] == [c.id for c in old]
    assert all(a.lease_token != b.lease_token for a, b in zip(old, new, strict=True))
    return old, new


def test_a_batch_of_successes_with_stale_tokens_applies_only_the_fresh_ones(
    app: durq.Durq, clock: Clock
) -> None:
    """Every other job of the batch was reaped and claimed again (its outcome carries the
    old token): those rows stay running under the new lease and are reported not applied;
    the rest succeed with their own results."""
    register(app)
    old, new = stale_and_fresh(app, clock, 6)
    for i in range(6, 12):
        app.tasks["work"].enqueue(n=i)
    plain = sorted(claim(app), key=lambda c: c.id)
    outcomes = []
    for i, (stale, fresh) in enumerate(zip(old, plain, strict=True)):
        outcomes.append(Outcome(stale.id, stale.lease_token, "succeeded", result=f'"old{i}"'))
        outcomes.append(Outcome(fresh.id, fresh.lease_token, "succeeded", result=f'"new{i}"'))
    applied = app.store.finish(outcomes)
    assert applied == [False, True] * 6
    for stale, again in zip(old, new, strict=True):
        row = app.get(stale.id)
        assert (row.state, row.result, row.attempts) == ("running", None, 2)
        # the new lease still holds: its outcome is written
        assert app.store.extend_leases([(again.id, again.lease_token)], LEASE) == []
    for i, fresh in enumerate(plain):
        row = app.get(fresh.id)
        assert (row.state, row.result) == ("succeeded", f"new{i}")
    assert (
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1") for c in new])
        == [True] * 6
    )


def test_one_job_twice_in_a_batch_applies_only_the_outcome_of_its_current_lease(
    app: durq.Durq, clock: Clock
) -> None:
    """Two attempts of one job in one batch (the first lost its lease, the job was claimed
    again, both bodies returned before the claimer's next commit): only the outcome of the
    current lease is written and reported applied, in either order and whatever the kinds.
    A stale outcome reported as applied would be logged as that job's success."""
    register(app)
    kinds = [
        ("succeeded", "succeeded"),
        ("succeeded", "retry"),
        ("retry", "succeeded"),
        ("failed", "succeeded"),
        ("succeeded", "failed"),
    ]
    old, new = stale_and_fresh(app, clock, len(kinds))

    def outcome(c: Claimed, kind: str, tag: str) -> Outcome:
        if kind == "succeeded":
            return Outcome(c.id, c.lease_token, kind, result=json.dumps(tag))
        return Outcome(c.id, c.lease_token, kind, error=err(c.attempt), delay=3600)

    batch: list[Outcome] = []
    for (stale_kind, fresh_kind), a, b in zip(kinds, old, new, strict=True):
        batch += [outcome(a, stale_kind, "stale"), outcome(b, fresh_kind, "fresh")]
    assert app.store.finish(batch) == [False, True] * len(kinds)
    for (_, fresh_kind), b in zip(kinds, new, strict=True):
        row = app.get(b.id)
        if fresh_kind == "succeeded":
            assert (row.state, row.result) == ("succeeded", "fresh")
        elif fresh_kind == "retry":
            assert (row.state, row.attempts) == ("scheduled", 2)
            assert [e.message for e in row.errors][-1] == "boom"
        else:
            assert row.state == "failed"


def test_one_job_twice_in_a_batch_in_the_other_order(app: durq.Durq, clock: Clock) -> None:
    """The same with the current lease's outcome first and the stale one after it."""
    register(app)
    old, new = stale_and_fresh(app, clock, 3)
    batch = []
    for a, b in zip(old, new, strict=True):
        batch.append(Outcome(b.id, b.lease_token, "succeeded", result='"fresh"'))
        batch.append(Outcome(a.id, a.lease_token, "succeeded", result='"stale"'))
    assert app.store.finish(batch) == [True, False] * 3
    assert {app.get(b.id).result for b in new} == {"fresh"}


def test_a_stale_failure_beside_its_jobs_success_fires_no_on_fail_hook(
    app: durq.Durq, clock: Clock
) -> None:
    """A stale ``failed`` outcome of a job whose current attempt succeeded in the same
    batch: the job succeeded, so its ``on_fail`` hook must not run."""
    seen: list[int] = []

    def on_fail(job: durq.Job) -> None:
        seen.append(job.id)

    @app.task(max_attempts=5, on_fail=on_fail)
    def work(n: int = 0) -> int:
        return n

    old, new = stale_and_fresh(app, clock, 1)
    (a,), (b,) = old, new
    batch = [
        Outcome(a.id, a.lease_token, "failed", error=err(1), on_fail=True),
        Outcome(b.id, b.lease_token, "succeeded", result="1", on_fail=True),
    ]
    assert app.store.finish(batch) == [False, True]
    assert app.get(b.id).state == "succeeded"
    hooks = [j for j in app.jobs(limit=100) if j.id != b.id]
    assert hooks == []


#: results a JSON round trip inside SQL could change: quotes, backslashes, control
#: characters, text that looks like JSON escapes, non-ASCII beyond the BMP, big ones.
ODD_RESULTS = [
    "quote \" and ' and \\ backslash \\\\ \\u0041 \\n",
    "control \x01\x02\x07\x08\t\n\r\x0b\x0c\x1b\x1f\x7f end",
    "unicode \u00e9 \u2028 \u2029 \ufeff \U0001f600 \u4e2d\u6587",
    '{"looks": "like json"}',
    "",
    "null",
    "x" * 200_000,
    ["nested", {"k": 'v"\\'}, [1.5, -0.0, 10**30]],
    {"\u00e9": "\U0001f600", "": None, "a\\b": 'c"d'},
    -(2**63),
    2**63 - 1,
    None,
    True,
]


def test_odd_results_come_back_exactly_from_a_batch(app: durq.Durq) -> None:
    """Results go into the batch statement as JSON text inside JSON: each comes back as the
    task returned it, however it is spelled."""
    register(app)
    for i in range(len(ODD_RESULTS)):
        app.tasks["work"].enqueue(n=i)
    claimed = sorted(claim(app), key=lambda c: c.id)
    batch = [
        Outcome(c.id, c.lease_token, "succeeded", result=json.dumps(r))
        for c, r in zip(claimed, ODD_RESULTS, strict=True)
    ]
    assert app.store.finish(batch) == [True] * len(batch)
    for c, r in zip(claimed, ODD_RESULTS, strict=True):
        got = app.get(c.id)
        assert got.state == "succeeded"
        assert got.result == json.loads(json.dumps(r))


def test_stored_text_a_codec_made_is_kept_byte_for_byte(backend_url: str, clock: Clock) -> None:
    """A codec may store any text (``durq.codecs.Codec``): a batch writes it as given, as
    one outcome on its own does. Here a codec that stores non-ASCII and control
    characters raw (no JSON escaping): the stored text and the decoded result are exact."""

    tail = "\x01\u00e9\U0001f600\\\"'"
    if backend_url.startswith("sqlite"):  # PostgreSQL text cannot hold NUL; SQLite's can
        tail += "\x00 after NUL"

    class Raw:
        def encode(self, text: str) -> str:
            return "raw:" + json.dumps(json.loads(text), ensure_ascii=False) + tail

        def decode(self, stored: str) -> str:
            assert stored.startswith("raw:") and stored.endswith(tail), repr(stored)
            return stored[4 : -len(tail)]

    app = durq.Durq(backend_url, clock=clock, codec=Raw())
    try:
        register(app)
        texts = [f'r{i} \\ " \u2028' for i in range(5)]
        for i in range(5):
            app.tasks["work"].enqueue(n=i)
        claimed = sorted(claim(app), key=lambda c: c.id)
        codec = Raw()
        batch = [
            Outcome(c.id, c.lease_token, "succeeded", result=codec.encode(json.dumps(t)))
            for c, t in zip(claimed, texts, strict=True)
        ]
        assert app.store.finish(batch) == [True] * 5
        for c, t in zip(claimed, texts, strict=True):
            assert app.get(c.id).result == t
    finally:
        app.close()


@pytest.mark.parametrize("n", [2, 300])
def test_encrypted_results_of_a_batch_decrypt_to_what_the_tasks_returned(
    backend_url: str, clock: Clock, n: int
) -> None:
    """With ``Encrypted``, a batch stores each result sealed (no plaintext in the row) and
    each reads back as returned; a stale token among them is still refused."""
    codec = Encrypted(keys=[("k1", Encrypted.generate_key())])
    app = durq.Durq(backend_url, clock=clock, codec=codec)
    try:
        register(app)
        for i in range(n):
            app.tasks["work"].enqueue(n=i)
        claimed = sorted(claim(app, limit=n), key=lambda c: c.id)
        results = [{"secret": f"s\u00e9cret-{i}", "q": '"\\'} for i in range(n)]
        batch = [
            Outcome(c.id, c.lease_token + (1 if i == 1 else 0), "succeeded",
                    result=codec.encode(json.dumps(r)))
            for i, (c, r) in enumerate(zip(claimed, results, strict=True))
        ]  # fmt: skip
        expected = [i != 1 for i in range(n)]
        assert app.store.finish(batch) == expected
        for i, (c, r) in enumerate(zip(claimed, results, strict=True)):
            got = app.get(c.id)
            if i == 1:
                assert got.state == "running"
                continue
            assert (got.state, got.result) == ("succeeded", r)
    finally:
        app.close()
