"""Typed payloads (issue 15 item 2) and encrypted payloads (item 3, case 39), on every
backend."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest

import durq
from durq.codecs import Encrypted
from durq.errors import ConfigError, PayloadError
from durq.worker.executor import Executor
from tests.support.procs import ROOT


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Order:
    id: int
    items: list[str]
    color: Color = Color.RED


class Address(TypedDict):
    city: str


class User(pydantic.BaseModel):
    name: str
    age: int


def run_one(app: durq.Durq, task: str) -> Any:
    """Claim one job and run it through the worker's executor; returns the outcome."""
    (c,) = app.store.claim("default", [task], 1, 30.0, "w")
    ctx = durq.JobContext(c.id, c.task, c.queue, c.attempt, c.max_attempts, c.lease_token,
                          app.store.set_progress, _steps=app.store)  # fmt: skip
    outcome = Executor(app).run_sync(c, ctx)
    assert app.store.finish([outcome]) == [True]
    return outcome


def test_a_dataclass_enum_datetime_typeddict_and_model_round_trip(app: durq.Durq) -> None:
    seen: list[tuple[Any, ...]] = []

    @app.task
    def ship(order: Order, when: dt.datetime, to: Address, user: User, note: str = "") -> str:
        seen.append((order, when, to, user))
        return "shipped"

    when = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    job = ship.enqueue(order=Order(7, ["a", "b"], Color.BLUE), when=when, to={"city": "Oslo"},
                       user=User(name="ada", age=36))  # fmt: skip
    assert job.payload == {
        "order": {"id": 7, "items": ["a", "b"], "color": "blue"},
        "when": "2026-05-01T12:00:00+00:00",
        "to": {"city": "Oslo"},
        "user": {"name": "ada", "age": 36},
    }
    assert run_one(app, "ship").kind == "succeeded"
    assert seen == [(Order(7, ["a", "b"], Color.BLUE), when, {"city": "Oslo"},
                     User(name="ada", age=36))]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"order": {"id": "7", "items": []}}, r"order\.id: expected int, got str '7'"),
        ({"order": {"id": 7, "items": [], "extra": 1}}, r"order: unknown field\(s\) \['extra'\]"),
        ({"order": {"items": []}}, r"order\.id: missing"),
        ({"order": Order(7, [], "green")}, r"order\.color: expected one of \['red', 'blue'\]"),  # type: ignore[arg-type]
        ({"when": "yesterday"}, r"when: expected datetime"),
        ({"to": {"town": "x"}}, r"to: unknown key\(s\) \['town'\]"),
        ({"user": {"name": "ada", "age": "old"}}, r"user\.age: Input should be a valid integer"),
    ],
)
def test_a_wrong_type_is_refused_at_enqueue_naming_the_field(
    app: durq.Durq, change: dict[str, Any], message: str
) -> None:
    @app.task
    def ship(order: Order, when: dt.datetime, to: Address, user: User) -> None:
        return None

    good: dict[str, Any] = {"order": Order(1, []), "when": dt.datetime(2026, 1, 1),
                            "to": {"city": "x"}, "user": User(name="a", age=1)}  # fmt: skip
    with pytest.raises(PayloadError, match="payload does not fit ship\\(\\): " + message):
        ship.enqueue(**{**good, **change})
    assert app.jobs() == []


def test_plain_annotations_are_checked_only_with_strict_types(
    app: durq.Durq, backend_url: str
) -> None:
    @app.task
    def fetch(url: str, tries: int = 1) -> None:
        return None

    @app.task(strict_types=True)
    def strict_fetch(url: str, tries: int = 1) -> None:
        return None

    assert fetch.enqueue(url=123).payload == {"url": 123}  # today's behaviour
    with pytest.raises(PayloadError, match=r"strict_fetch\(\): url: expected str, got int 123"):
        strict_fetch.enqueue(url=123)
    with pytest.raises(PayloadError, match=r"tries: expected int, got bool True"):
        strict_fetch.enqueue(url="x", tries=True)
    everywhere = durq.Durq(backend_url, strict_types=True)
    try:

        @everywhere.task
        def fetch2(url: str) -> None:
            return None

        with pytest.raises(PayloadError, match="url: expected str"):
            fetch2.enqueue(url=1)
    finally:
        everywhere.close()


def test_a_worker_fails_a_stored_payload_that_does_not_fit_as_bad_payload(
    app: durq.Durq,
) -> None:
    @app.task
    def ship(order: Order) -> None:
        return None

    app.tasks.pop("ship")  # a producer that only names the task stores it unchecked
    app.enqueue("ship", {"order": {"id": "x", "items": []}})
    app.tasks["ship"] = ship
    outcome = run_one(app, "ship")
    assert outcome.kind == "failed" and outcome.error.kind == "bad_payload"
    assert "order.id: expected int" in outcome.error.message


TYPED_APP = """
import dataclasses, datetime as dt, enum
import durq
dq = durq.Durq()

class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"

@dq.task
def report(zip: str, count: int, ratio: float, urgent: bool, level: Level, at: dt.datetime,
           tags: list[str]) -> None:
    return None
"""


def test_durq_enqueue_converts_key_value_by_annotation(tmp_path: Path, backend_url: str) -> None:
    (tmp_path / "typed_app.py").write_text(TYPED_APP)
    out = subprocess.run(
        [sys.executable, "-m", "durq", "enqueue", "report", "zip=02134", "count=3",
         "ratio=0.5", "urgent=yes", "level=high", "at=2026-01-02T03:04:05+00:00",
         'tags=["a", "b"]', "--app", "typed_app:dq", "--db", backend_url, "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["payload"] == {
        "zip": "02134", "count": 3, "ratio": 0.5, "urgent": True, "level": "high",
        "at": "2026-01-02T03:04:05+00:00", "tags": ["a", "b"],
    }  # fmt: skip
    bad = subprocess.run(
        [sys.executable, "-m", "durq", "enqueue", "report", "zip=1", "count=many", "ratio=1",
         "urgent=no", "level=high", "at=2026-01-02", "tags=[]", "--app", "typed_app:dq",
         "--db", backend_url],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
    )  # fmt: skip
    assert bad.returncode == 1
    assert "count: expected int, got str 'many'" in bad.stderr


# -- encryption ---------------------------------------------------------------------------

K1, K2 = Encrypted.generate_key(), Encrypted.generate_key()


def encrypted_app(url: str, keys: list[tuple[str, str]]) -> durq.Durq:
    dq = durq.Durq(url, codec=Encrypted(keys))

    @dq.task
    def work(secret: str) -> str:
        with_step = durq.context().step("echo", lambda: "step " + secret)
        return "seen " + with_step

    @dq.task
    def after(prev: str) -> str:
        return prev + "!"

    return dq


def assert_no_plaintext(backend_url: str, marker: str, tables: tuple[str, ...]) -> None:
    """No byte of ``marker`` at rest: in the SQLite file and its WAL, or in any row of
    ``tables`` of the PostgreSQL schema."""
    if backend_url.startswith("sqlite"):
        path = backend_url.removeprefix("sqlite:///")
        for suffix in ("", "-wal"):
            if os.path.exists(path + suffix):
                assert marker.encode() not in Path(path + suffix).read_bytes()
        return
    import psycopg

    schema = backend_url.rpartition("schema=")[2]
    with psycopg.connect(backend_url.partition("?")[0]) as conn:
        for table in tables:
            dump = conn.execute(
                f'SELECT count(*) FROM "{schema}".{table} t WHERE t::text LIKE %s',
                (f"%{marker}%",),
            ).fetchone()
            assert dump == (0,), table


def test_no_plaintext_at_rest_rotation_reads_old_jobs_and_a_missing_key_fails_one_job(
    backend_url: str, tmp_path: Path
) -> None:
    old = encrypted_app(backend_url, [("k1", K1)])
    rotated = encrypted_app(backend_url, [("k2", K2), ("k1", K1)])
    new_only = encrypted_app(backend_url, [("k2", K2)])
    try:
        j1 = old.get_task("work").enqueue(secret="MARKER-one")
        chain = rotated.chain(rotated.get_task("work").s(secret="MARKER-two"),
                              rotated.get_task("after").s())  # fmt: skip
        assert rotated.get(j1.id).payload == {"secret": "MARKER-one"}  # k1 still reads
        assert durq.Durq(backend_url).get(j1.id).payload == "encrypted (key k1)"
        assert durq.Durq(backend_url).get(chain[0].id).payload == "encrypted (key k2)"
        # a worker with only k2 fails the k1 job alone, with the reason
        outcome = run_one(new_only, "work")
        assert outcome.kind == "failed" and outcome.error.kind == "undecodable_payload"
        assert outcome.error.message.startswith("key k1 unavailable")
        for _ in range(2):
            assert run_one(new_only, "work" if _ == 0 else "after").kind == "succeeded"
        assert rotated.get(chain[1].id).result == "seen step MARKER-two!"
        # with k1 back, a manual retry succeeds
        rotated.retry(j1.id)
        assert run_one(rotated, "work").kind == "succeeded"
        assert rotated.get(j1.id).result == "seen step MARKER-one"
        assert_no_plaintext(backend_url, "MARKER", ("jobs", "steps"))
    finally:
        for app in (old, rotated, new_only):
            app.close()


def test_bad_keys_are_refused() -> None:
    for keys, message in [
        ([], "at least one"),
        ([("k:1", K1)], "without ':'"),
        ([("k1", "c2hvcnQ=")], "32 bytes"),
        ([("k1", "not base64!")], "not base64"),
        ([("k1", K1), ("k1", K2)], "twice"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Encrypted(keys)  # type: ignore[arg-type]
    assert Encrypted.from_env("") is None
    with pytest.raises(ConfigError, match="id=base64key"):
        Encrypted.from_env("nokey")


def test_reencrypt_rewrites_everything_at_rest_so_the_old_key_can_go(backend_url: str) -> None:
    """Case 39 step 2: after rotation, dq.reencrypt() rewrites queued payloads, results and
    steps (and values stored before encryption); then the old key is not needed."""
    old = encrypted_app(backend_url, [("k1", K1)])
    rotated = encrypted_app(backend_url, [("k2", K2), ("k1", K1)])
    new_only = encrypted_app(backend_url, [("k2", K2)])
    try:
        done = old.get_task("work").enqueue(secret="a")
        assert run_one(old, "work").kind == "succeeded"  # a result and a step under k1
        waiting = old.get_task("work").enqueue(secret="b")
        unencrypted = durq.Durq(backend_url)
        try:
            legacy = unencrypted.enqueue("work", {"secret": "c"})
        finally:
            unencrypted.close()
        with pytest.raises(ConfigError, match="needs Durq"):
            durq.Durq(backend_url).reencrypt()
        assert rotated.reencrypt(chunk=2) >= 4
        assert rotated.reencrypt() == 0  # nothing left under another key
        assert new_only.get(done.id).result == "seen step a"
        assert new_only.get(waiting.id).payload == {"secret": "b"}
        assert new_only.get(legacy.id).payload == {"secret": "c"}
        assert durq.Durq(backend_url).get(legacy.id).payload == "encrypted (key k2)"
    finally:
        for app in (old, rotated, new_only):
            app.close()


def test_a_worker_without_a_codec_never_runs_ciphertext_as_arguments(backend_url: str) -> None:
    """Case 39 step 4: encryption off in the worker's app; the job fails with the reason."""
    sealed = encrypted_app(backend_url, [("k1", K1)])
    bare = durq.Durq(backend_url)
    try:
        job = sealed.get_task("work").enqueue(secret="d")

        @bare.task
        def work(secret: str) -> str:
            raise AssertionError("ran with ciphertext")

        outcome = run_one(bare, "work")
        assert outcome.kind == "failed" and outcome.error.kind == "undecodable_payload"
        assert "encrypted (key k1)" in outcome.error.message
        assert sealed.get(job.id).state == "failed"
    finally:
        sealed.close()
        bare.close()


def test_the_cli_shows_encrypted_without_the_key_and_the_value_with_it(backend_url: str) -> None:
    sealed = encrypted_app(backend_url, [("k1", K1)])
    try:
        job = sealed.get_task("work").enqueue(secret="MARKER-cli")
    finally:
        sealed.close()

    def show(env: dict[str, str]) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "durq", "jobs", "show", str(job.id), "--db", backend_url,
             "--json"],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
            env={**{k: v for k, v in os.environ.items() if k != "DURQ_KEYS"}, **env},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["payload"]

    assert show({}) == "encrypted (key k1)"
    assert show({"DURQ_KEYS": f"k1={K1}"}) == {"secret": "MARKER-cli"}


def _nonce(stored: str) -> bytes:
    return base64.b64decode(stored.rsplit(":", 1)[1])[:12]


def test_nonces_are_never_reused_across_threads_or_a_fork() -> None:
    # nonces come from one os.urandom read per 256 values and thread (durq/codecs.py: _Nonces)
    codec = Encrypted([("k1", Encrypted.generate_key())])
    seen: list[bytes] = []
    lock = threading.Lock()

    def seal() -> None:
        mine = [_nonce(codec.encode("{}")) for _ in range(1000)]
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=seal) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == len(seen) == 4000
    codec.encode("{}")  # the buffer now holds unused nonces a fork would copy
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(write, _nonce(codec.encode("{}")))
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as fh:
        child = fh.read()
    assert len(child) == 12 and child != _nonce(codec.encode("{}"))


def test_an_async_steps_record_is_encrypted_and_read_back(backend_url: str) -> None:
    """``ctx.astep`` stores its record through the app's codec as ``ctx.step`` does: no
    plaintext of it at rest, and a later attempt gets the recorded value."""
    import asyncio

    from durq.testing import drain

    dq = durq.Durq(backend_url, codec=Encrypted([("k1", K1)]))
    ran: list[str] = []

    @dq.task(max_attempts=2)
    async def awork(secret: str) -> str:
        ctx = durq.context()

        async def body() -> str:
            ran.append(secret)
            await asyncio.sleep(0)
            return "step " + secret

        value = await ctx.astep("echo", body)
        if ctx.attempt == 1:
            raise OSError("once")  # the retry must read the record, not run the step again
        return "seen " + value

    try:
        job = awork.enqueue(secret="MARKER-async")
        drain(dq)
        assert dq.get(job.id).result == "seen step MARKER-async"
        assert ran == ["MARKER-async"]
        assert_no_plaintext(backend_url, "MARKER", ("steps",))
    finally:
        dq.close()
