"""The rough edges of issue 16 §7, found by trying durq as a new user would (one test each)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import durq
from durq.classify import PERMANENT, TRANSIENT, classify, rule
from durq.model import ScheduleDefinition
from tests.conftest import PG_URL, require_pg

APP = textwrap.dedent(
    """
    import durq

    dq = durq.Durq({url!r})

    @dq.task(queue="emails")
    def send(to: str) -> str:
        return to

    @dq.periodic("*/5 * * * *")
    @dq.task
    def tick() -> None: ...
    """
)


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "DURQ_URL"}
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True, text=True, cwd=cwd, env={**base, **(env or {})}, timeout=60,
    )  # fmt: skip


def first_stderr_line(args: list[str], cwd: Path) -> str:
    """Start `durq ARGS`, read its first line on stderr, stop it (also on failure)."""
    with subprocess.Popen(
        [sys.executable, "-m", "durq", *args], cwd=cwd, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stderr is not None
            return proc.stderr.readline()
        finally:
            proc.terminate()
            proc.wait(30)


@pytest.fixture
def user_app(tmp_path: Path) -> tuple[Path, Path]:
    """A user's project directory with `shop.py` (its app on its own database), and
    another directory to run the CLI from."""
    project = tmp_path / "project"
    project.mkdir()
    db = tmp_path / "data" / "shop.db"
    db.parent.mkdir()
    (project / "shop.py").write_text(APP.format(url=f"sqlite:///{db}"))
    return project, db


def test_enqueue_with_app_uses_the_apps_database(user_app: tuple[Path, Path]) -> None:
    project, db = user_app
    out = cli("enqueue", "send", "to=ada", "--app", "shop:dq", "--json", cwd=project)
    assert out.returncode == 0, out.stderr
    assert not (project / "durq.db").exists()  # before the fix: written to ./durq.db
    assert [j.payload for j in durq.Durq(f"sqlite:///{db}").jobs()] == [{"to": "ada"}]
    other = project / "other.db"
    out = cli("enqueue", "send", "to=bob", "--app", "shop:dq", "--db", str(other), cwd=project)
    assert out.returncode == 0, out.stderr
    assert [j.payload for j in durq.Durq(str(other)).jobs()] == [{"to": "bob"}]


def test_a_wait_timeout_says_no_worker_watches_the_queue_and_where(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'a.db'}")
    job = dq.enqueue("send", {"to": "x"}, queue="emails")
    with pytest.raises(TimeoutError) as info:
        job.wait(timeout=0.05)
    message = str(info.value)
    assert "no live worker watches queue 'emails'" in message
    assert str(tmp_path / "a.db") in message


def test_the_worker_names_its_database_by_absolute_path_in_its_first_line(
    user_app: tuple[Path, Path],
) -> None:
    project, _ = user_app
    (project / "rel.py").write_text(APP.format(url="sqlite:///rel.db"))
    first = json.loads(first_stderr_line(["worker", "rel:dq", "--no-prune"], project))
    assert first["event"] == "worker_started"
    assert first["url"] == f"sqlite:///{project / 'rel.db'}"


def test_postgres_read_verbs_close_their_pool(pg_url: str, tmp_path: Path) -> None:
    assert cli("migrate", "--db", pg_url, cwd=tmp_path).returncode == 0
    for _ in range(4):  # before the fix: 5 of 6 runs printed ConnectionPool.__del__ errors
        out = cli("status", "--db", pg_url, cwd=tmp_path)
        assert out.returncode == 0 and out.stderr == "", out.stderr


def test_a_postgres_url_without_psycopg_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from durq.cli import main; sys.argv = ['durq', 'status', '--db', "
        "'postgresql://u@127.0.0.1/x']; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert out.returncode == 1
    assert "pip install 'durq[postgres]'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("/test", "/no_such_db"), 'database "no_such_db" does not exist'),
        (("postgres@", "no_such_role@"), 'role "no_such_role" does not exist'),
        ((":5432", ":5999"), "Connection refused"),
    ],
)
def test_a_wrong_postgres_database_fails_at_once_with_the_servers_reason(
    change: tuple[str, str], said: str
) -> None:
    require_pg()
    url = PG_URL.replace(*change)
    assert url != PG_URL
    with pytest.raises(durq.StoreError) as info:
        durq.Durq(url).store  # noqa: B018
    message = str(info.value)
    assert said in message and message.count(said) == 1
    assert "pool initialization incomplete" not in message


def test_an_unknown_postgres_url_option_is_named_once() -> None:
    require_pg()
    with pytest.raises(durq.ConfigError) as info:
        durq.Durq(f"{PG_URL}?pool=4").store  # noqa: B018
    assert str(info.value).count('"pool"') == 1 and "pool_size" in str(info.value)


def test_a_file_path_for_the_app_suggests_module_and_app(user_app: tuple[Path, Path]) -> None:
    project, _ = user_app
    (project / "tasks.py").write_text("import durq\nqueue_app = durq.Durq('sqlite:///q.db')\n")
    out = cli("worker", "tasks.py", cwd=project)
    assert out.returncode == 2
    assert "tasks:queue_app" in out.stderr and "tasks:py" not in out.stderr
    out = cli("worker", "tasks", cwd=project)  # no `dq` in it: name the one it has
    assert "tasks:queue_app" in out.stderr
    out = cli("worker", "tasks.py:queue_app", cwd=project)  # found by a new-user pass
    assert out.returncode == 2
    assert out.stderr == (
        "durq: error: 'tasks.py:queue_app' is a file path; give the module and the app: "
        "tasks:queue_app\n"
    )


def test_a_misspelt_payload_key_names_the_unexpected_and_the_missing_one(make_app) -> None:
    dq = make_app()

    @dq.task
    def send(to: str, subject: str = "") -> None: ...

    with pytest.raises(durq.PayloadError) as info:
        send.enqueue(too="ada")
    assert "missing 'to'" in str(info.value) and "unexpected 'too'" in str(info.value)


def test_a_non_json_value_names_its_key(make_app) -> None:
    with pytest.raises(durq.PayloadError, match="payload key 'when'"):
        make_app().enqueue("send", {"to": "ada", "when": object()})


def test_sqlite_with_two_slashes_hints_at_the_third() -> None:
    with pytest.raises(durq.ConfigError, match=r"did you mean sqlite:///jobs\.db"):
        durq.Durq("sqlite://jobs.db").store  # noqa: B018


def test_retry_and_cancel_errors_have_the_error_prefix(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    job = durq.Durq(db).enqueue("send", {})
    for verb in ("retry", "cancel"):
        out = cli(verb, str(job.id), "99", "--db", db, cwd=tmp_path)
        errors = [line for line in out.stderr.splitlines() if line]
        assert out.returncode == 1 and errors
        assert all(line.startswith("durq: error: ") for line in errors), out.stderr


def test_a_queue_no_task_uses_is_warned_about(user_app: tuple[Path, Path]) -> None:
    project, _ = user_app
    first = first_stderr_line(["worker", "shop:dq", "--queues", "emials", "--no-prune"], project)
    assert "warning: no task of shop:dq uses queue 'emials'" in first


@pytest.mark.parametrize(
    "error",
    [
        NameError("name 'sned' is not defined"),
        AttributeError("'NoneType' object has no attribute 'email'"),
        ModuleNotFoundError("No module named 'reportlab'"),
        TypeError("send() got an unexpected keyword argument 'too'"),
        TypeError("send() missing 1 required positional argument: 'to'"),
    ],
)
def test_programming_errors_are_permanent_unless_a_rule_says_otherwise(
    error: Exception,
) -> None:
    verdict = classify(error)
    assert (verdict.kind, verdict.reason) == (PERMANENT, "programming_error")
    assert classify(error, [rule(TRANSIENT, types=type(error))]).kind == TRANSIENT
    assert classify(TypeError("unsupported operand")).kind == TRANSIENT  # unclassified


def test_a_name_error_fails_the_job_at_once_labelled_failed(make_app) -> None:
    dq = make_app()

    @dq.task(max_attempts=5)
    def broken() -> None:
        sned()  # type: ignore[name-defined]  # noqa: F821

    job = broken.enqueue()
    result = dq.run_until_idle()
    assert result.failed == [job.id] and result.ran == [job.id]  # one attempt, no retry
    assert job.refresh().last_error.kind == "permanent:programming_error"  # type: ignore[union-attr]


def test_periodic_list_needs_no_database_and_shows_no_anchor_as_a_slot(
    user_app: tuple[Path, Path],
) -> None:
    project, db = user_app
    out = cli("periodic", "list", "--app", "shop:dq", "--json", cwd=project)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["name"] == "tick" and row["last_slot"] is None and not db.exists()
    app = durq.Durq(f"sqlite:///{db}")
    tick = ScheduleDefinition("tick", "* * * * *", "UTC", "tick", "{}")
    app.store.define_schedules([tick], "v1", "w1", fresh=10)  # a scheduler started, nothing ran
    (row,) = json.loads(cli("periodic", "list", "--app", "shop:dq", "--json", cwd=project).stdout)
    assert row["last_slot"] is None and row["last_job_id"] is None


def test_periodic_list_prints_times_in_the_format_jobs_list_uses(
    user_app: tuple[Path, Path],
) -> None:
    """One format for a point in time in every table (periodic list alone printed ISO 8601
    with a T and microseconds)."""
    project, db = user_app
    app = durq.Durq(f"sqlite:///{db}")
    app.enqueue("tick", {}, delay=60)
    app.close()
    wide = {"COLUMNS": "200"}
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d{4}")
    listed = cli("jobs", "list", "--db", f"sqlite:///{db}", cwd=project, env=wide)
    assert listed.returncode == 0, listed.stderr
    assert stamp.search(listed.stdout), listed.stdout
    periodic = cli("periodic", "list", "--app", "shop:dq", cwd=project, env=wide)
    assert periodic.returncode == 0, periodic.stderr
    assert stamp.search(periodic.stdout), periodic.stdout
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d", periodic.stdout), periodic.stdout


def test_jobs_show_hides_what_does_not_apply(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    dq = durq.Durq(db)

    @dq.task
    def work() -> str:
        durq.context().progress(0.5, "half way")
        return "done"

    job = work.enqueue()
    waiting = cli("jobs", "show", str(job.id), "--db", db, cwd=tmp_path).stdout
    assert "run at" in waiting and "worker:" not in waiting and "started" not in waiting
    dq.run_until_idle()
    shown = cli("jobs", "show", str(job.id), "--db", db, cwd=tmp_path).stdout
    assert 'result: "done"' in shown and "finished" in shown
    for absent in ("half way", "deadline", "park ttl", "notice at", "key:", "meta:", ": -"):
        assert absent not in shown, (absent, shown)
    full = json.loads(cli("jobs", "show", str(job.id), "--db", db, "--json", cwd=tmp_path).stdout)
    assert full["progress"]["message"] == "half way" and full["deadline"] is None


def test_no_help_text_shows_raw_markup() -> None:
    import click

    from durq.cli import cli as root

    def walk(group: click.Group, path: str) -> list[tuple[str, str]]:
        out = []
        for name, cmd in group.commands.items():
            out.append((f"{path} {name}", cmd.help or ""))
            if isinstance(cmd, click.Group):
                out.extend(walk(cmd, f"{path} {name}"))
        return out

    marked = [(name, text) for name, text in walk(root, "durq") if "``" in text or ":func:" in text]
    assert marked == []
    out = subprocess.run(
        [sys.executable, "-m", "examples.podcast_import", "--help"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and "``" not in out.stdout
    demo_line = next(line for line in out.stdout.splitlines() if line.startswith("demo "))
    assert "hosting migration" not in demo_line
