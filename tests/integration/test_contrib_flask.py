"""durq.contrib.flask: the extension, current_durq in a view, and the `flask durq` group."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from flask import Flask

import durq
from durq.contrib.flask import DurqFlask, current_durq
from durq.testing import assert_enqueued


def make(tmp_path: Path) -> tuple[Flask, durq.Durq]:
    app = Flask("shop")
    app.config["DURQ_URL"] = f"sqlite:///{tmp_path / 'flask.db'}"
    DurqFlask().init_app(app)
    with app.app_context():
        dq = current_durq()

    @dq.task
    def welcome(email: str) -> str:
        return f"hi {email}"

    @app.post("/signup/<email>")
    def signup(email: str) -> dict[str, int]:
        return {"job": welcome.enqueue(email=email).id}

    return app, dq


def test_a_view_enqueues_and_flask_durq_worker_runs_it(tmp_path: Path) -> None:
    app, dq = make(tmp_path)
    job = app.test_client().post("/signup/ada@example.org").get_json()["job"]
    assert_enqueued("welcome", dq=dq, email="ada@example.org")
    runner = app.test_cli_runner()
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:  # the worker takes SIGINT/SIGTERM for its graceful stop
        out = runner.invoke(args=["durq", "worker", "--until-idle", "--concurrency", "2"])
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert out.exit_code == 0, out.output
    assert dq.get(job).result == "hi ada@example.org"
    status = runner.invoke(args=["durq", "status", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["queues"]["default"]["counts"]["succeeded"] == 1
    assert "DURQ_URL" not in os.environ or os.environ["DURQ_URL"] != dq.url
    listed = runner.invoke(args=["durq", "jobs", "list", "--json"])
    assert [j["id"] for j in json.loads(listed.output)] == [job]
    dq.close()


def test_without_a_url_the_extension_says_what_to_set() -> None:
    with pytest.raises(durq.ConfigError, match="DURQ_URL"):
        DurqFlask().init_app(Flask("bare"))
    app = Flask("other")
    with app.app_context(), pytest.raises(durq.ConfigError, match="init_app"):
        current_durq()
