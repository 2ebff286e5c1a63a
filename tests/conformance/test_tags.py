"""Tags (issue 15 item 4): stored with the job, indexed, filterable, and the CLI's bulk
verbs, on every backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import durq
from durq.errors import ConfigError
from durq.model import AttemptError, Outcome
from tests.conftest import Clock
from tests.support.procs import ROOT


def register(app: durq.Durq) -> durq.Task:  # type: ignore[type-arg]
    @app.task
    def load(n: int) -> int:
        return n

    return load


def test_tags_are_stored_and_filter_jobs(app: durq.Durq) -> None:
    load = register(app)
    a = load.options(tags=["tenant:42", "import"]).enqueue(n=1)
    b = load.options(tags=["tenant:7", "import", "import"]).enqueue(n=2)
    many = load.options(tags=["tenant:42"]).enqueue_many([{"n": 3}, {"n": 4}])
    c = app.enqueue("load", {"n": 5}, tags=["tenant:42"], delay=60)
    plain = load.enqueue(n=6)
    assert a.tags == ["import", "tenant:42"] and b.tags == ["import", "tenant:7"]
    assert plain.tags == []
    assert [j.id for j in app.jobs(tag="tenant:42")] == [c.id, many[1].id, many[0].id, a.id]
    assert [j.id for j in app.jobs(tag="import")] == [b.id, a.id]
    assert [j.id for j in app.jobs(tag="tenant:42", state="scheduled")] == [c.id]
    assert app.jobs(tag="nobody") == []


@pytest.mark.parametrize(
    "tags",
    [["ok", ""], ["x" * 201], "tenant:42", [42], ["a\x00b"], [f"t{i}" for i in range(51)]],
)
def test_bad_tags_are_refused_and_nothing_is_written(app: durq.Durq, tags: object) -> None:
    load = register(app)
    with pytest.raises(ConfigError):
        load.options(tags=tags).enqueue(n=1)  # type: ignore[arg-type]
    assert app.jobs() == []


def durq_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


def test_cli_lists_cancels_and_retries_by_tag(
    app: durq.Durq, backend_url: str, clock: Clock
) -> None:
    load = register(app)
    tagged = [load.options(tags=["tenant:42"]).enqueue(n=i) for i in range(3)]
    other = load.options(tags=["tenant:7"]).enqueue(n=9)
    (c,) = app.store.claim("default", ["load"], 1, 30.0, "w")  # tagged[0] is running
    error = AttemptError(1, 0.0, "E", "x", "", "permanent")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=error)])  # ... and failed
    out = durq_cli("jobs", "list", "--tag", "tenant:42", "--db", backend_url, "--json")
    assert out.returncode == 0, out.stderr
    assert [j["id"] for j in json.loads(out.stdout)] == [j.id for j in reversed(tagged)]
    out = durq_cli("cancel", "--tag", "tenant:42", "--db", backend_url, "--json")
    assert out.returncode == 0, out.stderr
    assert {r["id"] for r in json.loads(out.stdout)} == {tagged[1].id, tagged[2].id}
    assert app.get(other.id).state == "queued"
    out = durq_cli("retry", "--tag", "tenant:42", "--db", backend_url, "--json")
    assert out.returncode == 0, out.stderr
    assert {r["id"] for r in json.loads(out.stdout)} == {j.id for j in tagged}
    # The CLI runs on the real clock, held at the store's high-water mark (this test's
    # clock is ahead of the wall): its run_at is a moment past the test clock's now.
    clock.advance(60)
    assert {str(app.get(j.id).state) for j in tagged} == {"queued"}
    out = durq_cli("cancel", "--db", backend_url)
    assert out.returncode == 2 and "give job ids or --tag" in out.stderr
    show = durq_cli("jobs", "show", str(tagged[0].id), "--db", backend_url, "--json")
    assert json.loads(show.stdout)["tags"] == ["tenant:42"]
