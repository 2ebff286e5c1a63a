"""durq.contrib.flask: the extension, current_durq in a view, and the `flask durq` group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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


SHOP = """
from flask import Flask, current_app
import durq
from durq.contrib.flask import DurqFlask

dq = durq.Durq("sqlite:///{db}")

@dq.task
def greet() -> str:
    return f"{{current_app.name}}: {{current_app.config['GREETING']}}"

def create_app():
    app = Flask("shop")
    app.config["GREETING"] = "welcome aboard"
    DurqFlask(dq).init_app(app)
    return app
"""


def test_flask_durq_worker_runs_bodies_in_the_app_context_with_durq_workers_options(
    tmp_path: Path,
) -> None:
    """Found by a new-user pass: a body using current_app (or Flask-SQLAlchemy's
    db.session) failed "Working outside of application context", and `flask durq worker`
    took none of `durq worker`'s options and logged JSON without its "time" field."""
    db = tmp_path / "shop.db"
    (tmp_path / "shop.py").write_text(SHOP.format(db=db), encoding="utf-8")
    dq = durq.Durq(f"sqlite:///{db}")
    job = dq.enqueue("greet")

    def flask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flask", "--app", "shop:create_app", "durq", "worker", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    out = flask("--until-idle", "--log-format", "json", "--concurrency", "2", "--no-prune")
    assert out.returncode == 0, out.stderr
    assert dq.get(job.id).result == "shop: welcome aboard"
    lines = [json.loads(x) for x in out.stderr.splitlines() if x.startswith("{")]
    started = next(line for line in lines if line["event"] == "worker_started")
    assert "time" in started  # durq worker's JSON format (the old one had only "ts")
    assert started["concurrency"] == 2
    assert any(x["event"] == "job_succeeded" and x["id"] == job.id for x in lines)
    bad = flask("--until-idle", "--pool", "nowhere")
    assert bad.returncode == 2 and "nowhere" in bad.stderr
    pool = flask("--until-idle", "--pool", "processes")
    assert pool.returncode == 2 and "for --pool processes run durq worker" in pool.stderr
    dq.close()


def test_without_a_durq_each_app_of_a_factory_gets_its_own(tmp_path: Path) -> None:
    """Found by a new-user pass: DurqFlask() kept the first app's Durq, so a second
    create_app() with another DURQ_URL silently used the first app's database."""
    ext = DurqFlask()
    apps = []
    for name in ("a", "b"):
        app = Flask(name)
        app.config["DURQ_URL"] = f"sqlite:///{tmp_path / name}.db"
        ext.init_app(app)
        apps.append(app)
    urls = []
    for app in apps:
        with app.app_context():
            urls.append(current_durq().url)
            current_durq().close()
    assert urls == [f"sqlite:///{tmp_path / 'a'}.db", f"sqlite:///{tmp_path / 'b'}.db"]
    assert ext.dq is None


def test_a_given_durq_and_another_durq_url_are_refused_not_ignored(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'durq.db'}")
    app = Flask("shop")
    app.config["DURQ_URL"] = f"sqlite:///{tmp_path / 'app.db'}"
    with pytest.raises(durq.ConfigError, match=r"DURQ_URL'\] is sqlite:///.*app\.db, but"):
        DurqFlask(dq).init_app(app)
    app.config["DURQ_URL"] = str(tmp_path / "durq.db")  # the same file, said another way
    DurqFlask(dq).init_app(app)
    with app.app_context():
        assert current_durq() is dq
