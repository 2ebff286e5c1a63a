"""Results are stored exactly or the attempt fails saying why (issue 13, defect 3).

Before the fix ``{1: "one", "1": "the string one", 2: "two"}`` was stored as
``{"1": "the string one", "2": "two"}`` and the job reported success.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durq
from durq.errors import ConfigError


def run_one(app: durq.Durq, value: Any) -> durq.Job:
    @app.task(name="give")
    def give() -> Any:
        return value

    job = app.tasks["give"].enqueue()
    assert app.worker(concurrency=1, lease=5).run(install_signals=False, stop_when_idle=True) == 0
    return app.get(job.id)


def test_a_result_with_non_str_keys_fails_naming_the_key(app: durq.Durq) -> None:
    job = run_one(app, {1: "one", "1": "the string one", 2: "two"})
    assert job.state == "failed"
    assert job.result is None
    assert job.last_error is not None and job.last_error.kind == "unserialisable_result"
    assert "keys must be str" in job.last_error.message
    assert "1" in job.last_error.message and "int" in job.last_error.message


def test_a_nested_non_str_key_is_named_by_its_path(app: durq.Durq) -> None:
    job = run_one(app, {"rows": [{"ok": 1}, {(1, 2): "pair"}]})
    assert job.state == "failed" and job.last_error is not None
    assert "result['rows'][1]" in job.last_error.message


def test_an_exact_result_round_trips(app: durq.Durq) -> None:
    value = {"a": [1, 2.5, None, True], "b": {"c": "\u0000\ud800"}, "n": 10**40}
    job = run_one(app, value)
    assert job.state == "succeeded"
    assert job.result == value


def test_a_result_over_the_limit_fails_for_good(make: Callable[..., durq.Durq]) -> None:
    app = make()
    app.result_limit = 100
    job = run_one(app, "x" * 200)
    assert job.state == "failed" and job.attempts == 1
    assert job.last_error is not None and job.last_error.kind == "result_too_large"
    assert "over the limit of 100 bytes" in job.last_error.message


def test_the_result_limit_is_a_setting(backend_url: str) -> None:
    app = durq.Durq(backend_url, result_limit=300)
    try:
        assert run_one(app, "y" * 250).state == "succeeded"
    finally:
        app.close()
    for bad in (0, -1, 1.5, "1MiB", True):
        with pytest.raises(ConfigError, match="result_limit must be a number of bytes"):
            durq.Durq(backend_url, result_limit=bad)  # type: ignore[arg-type]


def test_a_step_result_with_non_str_keys_is_refused(app: durq.Durq) -> None:
    @app.task(name="stepper")
    def stepper() -> str:
        durq.context().step("s", lambda: {1: "a"})
        return "unreachable"

    job = app.tasks["stepper"].enqueue()
    assert app.worker(concurrency=1, lease=5).run(install_signals=False, stop_when_idle=True) == 0
    job = app.get(job.id)
    assert job.last_error is not None and "keys must be str" in job.last_error.message
