"""Text a user's code hands durq for a text column (a fair key, a concurrency key, a step
name, a filter, a blob's name): a NUL character, a lone surrogate or an over-long key is a
``ConfigError``/``PayloadError`` naming it on every backend alike, and nothing is written.

Before, SQLite stored a NUL that PostgreSQL refused with a ``StoreError`` (``DataError:
PostgreSQL text fields cannot contain NUL``; in a job, ``ctx.step`` was so retried as
transient), a fair key with a surrogate raised a bare ``UnicodeEncodeError`` from the
driver, and a 20,000-character fair key was stored by SQLite while PostgreSQL answered
"cannot reach PostgreSQL ... index row requires 20040 bytes".
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

import durq
from durq.blobs import BlobStore
from durq.context import JobContext
from durq.errors import ConfigError, PayloadError

NOISE = "".join(random.Random(1).choice(string.ascii_letters) for _ in range(20_000))
BAD_KEYS = ["a\x00b", "a\ud800", "k" * 201, NOISE]


@pytest.mark.parametrize("bad", BAD_KEYS, ids=["nul", "surrogate", "201", "20000-noise"])
def test_a_bad_fair_key_is_refused_and_nothing_is_written(app: durq.Durq, bad: str) -> None:
    @app.task(fair_key=lambda p: p["tenant"])
    def export(tenant: str) -> None:
        return None

    with pytest.raises(ConfigError, match="fair_key returned"):
        export.enqueue(tenant=bad)
    with pytest.raises(ConfigError, match="fair_key returned"):
        export.enqueue_many([{"tenant": "A"}, {"tenant": bad}, {"tenant": "B"}])
    assert app.jobs() == []
    assert export.enqueue(tenant="k" * 200).id > 0  # the bound itself is accepted


def test_a_concurrency_key_with_a_nul_is_refused_and_nothing_is_written(
    app: durq.Durq,
) -> None:
    @app.task(concurrency=1, concurrency_key=lambda p: p["host"])
    def fetch(host: str) -> None:
        return None

    with pytest.raises(PayloadError, match="NUL"):
        fetch.enqueue(host="a\x00b")
    with pytest.raises(PayloadError, match="NUL"):
        fetch.enqueue_many([{"host": "a"}, {"host": "a\x00b"}, {"host": "b"}])
    with pytest.raises(ConfigError, match="NUL"):
        app.limit("a\x00b", 1)
    assert app.jobs() == []


def test_a_step_name_with_a_nul_is_refused_before_its_fn_runs(app: durq.Durq) -> None:
    @app.task
    def work() -> None:
        return None

    job = work.enqueue()
    (c,) = app.store.claim("default", ["work"], 1, 30.0, "w1")
    ctx = JobContext(
        c.id, c.task, c.queue, c.attempt, c.max_attempts, c.lease_token,
        app.store.set_progress, _steps=app.store,
    )  # fmt: skip
    calls: list[int] = []
    with pytest.raises(ConfigError, match="NUL"):
        ctx.step("charge\x00", lambda: calls.append(1))
    assert calls == [] and app.steps(job.id) == []
    assert ctx.step("charge", lambda: 7) == 7  # the job's lease and store are untouched


@pytest.mark.parametrize("field", ["tag", "queue", "task"])
def test_a_filter_with_a_nul_is_a_config_error(app: durq.Durq, field: str) -> None:
    with pytest.raises(ConfigError, match="NUL"):
        app.jobs(**{field: "a\x00b"})


@pytest.mark.parametrize("field", ["name", "alias", "holder"])
def test_a_blob_text_with_a_nul_is_refused_and_nothing_is_recorded(
    app: durq.Durq, tmp_path: Path, field: str
) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    with pytest.raises(ConfigError, match="NUL"):
        blobs.put(b"bytes", **{field: "a\x00b"})  # type: ignore[arg-type]
    assert blobs.ls() == []
