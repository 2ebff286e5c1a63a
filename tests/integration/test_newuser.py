"""What a new user following the README ran into (branch feat/newuser)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest

import durq
from tests.conftest import PG_URL
from tests.support.procs import ROOT


def test_events_logged_without_any_logging_setup_carry_their_fields(tmp_path: Path) -> None:
    """An app that configures no logging used to get bare event names on stderr
    (``alert_sent``) from Python's last-resort handler; the message now has the fields."""
    code = "import durq, sys\ndq = durq.Durq(sys.argv[1])\ndq.alert('disk:/var', 'disk 91% full')\n"
    out = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{tmp_path / 'jobs.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    assert out.stderr.strip() == 'alert_sent key="disk:/var" suppressed=0'


def test_a_plain_function_as_on_complete_says_to_make_it_a_task(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}")

    def import_finished(batch_id: int, outcome: str, counts: dict, meta: dict) -> None: ...

    with (
        pytest.raises(durq.ConfigError, match=r"decorate it with @dq\.task"),
        dq.batch(on_complete=import_finished),
    ):
        pass
    dq.close()


def test_a_read_verb_on_a_missing_database_says_what_creates_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "durq", "status", "--db", str(tmp_path / "jobs.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 1
    assert "nothing has created it yet" in out.stderr
    assert "durq migrate" in out.stderr
    assert not (tmp_path / "jobs.db").exists()


def test_three_slashes_to_an_absolute_path_say_it_takes_four(tmp_path: Path) -> None:
    """sqlite:///tmp/x.db is the relative tmp/x.db: the error named 'tmp/x.db' and nothing
    more, so a user who meant /tmp/x.db had no clue (found by the new-user pass)."""
    dq = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}")
    _ = dq.store  # the absolute file exists
    dq.close()
    relative = str(tmp_path / "jobs.db").lstrip("/")
    out = durq_cli("status", "--db", f"sqlite:///{relative}", cwd=ROOT)
    assert out.returncode == 1
    assert f"no database at {ROOT / relative}" in out.stderr  # where it looked, absolute
    assert f"sqlite:////{relative}" in out.stderr  # and how to name the one that exists


def test_a_payload_key_given_twice_is_refused(tmp_path: Path) -> None:
    """--payload '{"url": "a"}' url=b stored {"url": "b"} without a word."""
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    both = durq_cli("enqueue", "fetch", "--payload", '{"url": "a"}', "url=b", "--db", db, cwd=ROOT)
    assert both.returncode == 2
    assert "'url' is given in --payload and as key=value" in both.stderr
    twice = durq_cli("enqueue", "fetch", "url=a", "url=b", "--db", db, cwd=ROOT)
    assert twice.returncode == 2 and "'url' is given twice" in twice.stderr
    dq = durq.Durq(db)
    assert dq.jobs() == []  # nothing was stored
    dq.close()


def durq_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_a_verb_option_given_before_the_verb_says_where_it_goes(tmp_path: Path) -> None:
    """`durq --db URL status` said only "No such option '--db'"."""
    db = f"sqlite:///{tmp_path / 'app.db'}"
    out = durq_cli("--db", db, "jobs", "list", "--state", "failed", cwd=ROOT)
    assert out.returncode == 2
    assert f"--db goes after the verb: durq jobs list --state failed --db {db}" in out.stderr
    out = durq_cli("--json", "status", cwd=ROOT)
    assert out.returncode == 2 and "--json goes after the verb: durq status --json" in out.stderr
    assert "No such option '--bogus'" in durq_cli("--bogus", "status", cwd=ROOT).stderr
    assert not (tmp_path / "app.db").exists()


def with_password(url: str) -> tuple[str, str]:
    """``url`` with a password in it (the test server trusts any), and that password."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    netloc = f"{parts.username}:durq-not-shown@{parts.hostname}" + (
        f":{parts.port}" if parts.port else ""
    )
    return urlunsplit(parts._replace(netloc=netloc)), "durq-not-shown"


def test_enqueue_and_migrate_never_print_a_postgres_password(pg_url: str, tmp_path: Path) -> None:
    """`durq enqueue` and `durq migrate` echoed the URL as given, password and all."""
    url, password = with_password(pg_url)
    for args in (["migrate"], ["migrate", "--json"], ["enqueue", "send", "to=ada"]):
        out = durq_cli(*args, "--db", url, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert password not in out.stdout + out.stderr
        assert ":***@" in out.stdout


def test_enqueue_names_a_sqlite_database_by_its_absolute_path(tmp_path: Path) -> None:
    out = durq_cli("enqueue", "send", "to=ada", "--db", "sqlite:///rel.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(f"in sqlite:///{tmp_path / 'rel.db'}")


def test_a_read_verb_on_a_missing_postgres_schema_says_what_creates_it(pg_url: str) -> None:
    """It said "has durq schema v0 (v20 needed)" of a schema that does not exist."""
    out = durq_cli("status", "--db", pg_url, cwd=ROOT)
    assert out.returncode == 1
    assert "no durq schema" in out.stderr and "nothing has created it yet" in out.stderr
    assert "durq migrate" in out.stderr and "v0" not in out.stderr
    import psycopg

    schema = parse_qs(urlsplit(pg_url).query)["schema"][0]
    with psycopg.connect(PG_URL) as conn:  # a read verb created nothing
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None


def test_status_says_running_jobs_of_a_killed_worker_wait_for_a_worker(tmp_path: Path) -> None:
    """After a ``kill -9`` with no other worker, ``durq status`` listed the jobs as running
    (``live workers: 0``) and said nothing of who holds them or what frees them."""
    from tests.support.procs import WorkerProc, wait_for

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    dq = durq.Durq(url)
    job = dq.enqueue("long", {"seconds": 60})
    worker = WorkerProc("tests.apps.basic:dq", url, tmp_path / "worker.log")
    try:
        wait_for(lambda: dq.get(job.id).state == "running", 30, what="the job to start")
    finally:
        worker.kill()
    out = durq_cli("status", "--db", url, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "live workers: 0" in out.stdout
    assert "1 of them held by a worker that is gone, and no worker is live:" in out.stdout
    assert "they return to the queue when a worker starts" in out.stdout
    assert dq.get(job.id).state == "running"  # status only reads
    dq.close()


def _wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid`` so far (Linux /proc)."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # the thread ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_an_idle_sqlite_worker_backs_off_its_poll_despite_its_own_beats(tmp_path: Path) -> None:
    """The claimer polls the change counter every 1 ms, every 4 ms once idle for a second.
    The worker's own liveness beat commits every second on another connection, which moved
    the counter and counted as activity: an idle worker never backed off (7 % of a core,
    ~700 wake-ups a second; at 4 ms it is ~250). Wake-ups, not CPU time: they do not depend
    on how loaded the machine is."""
    from tests.support.procs import WorkerProc, wait_for

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    dq = durq.Durq(url)
    dq.store.migrate()
    worker = WorkerProc("tests.apps.basic:dq", url, tmp_path / "worker.log", ["--no-prune"])
    try:
        wait_for(lambda: len(dq.status()["workers"]) == 1, 30, what="the worker to beat")
        time.sleep(2.5)  # past its first busy second, and a beat or two
        before, t0 = _wakeups(worker.pid), time.monotonic()
        time.sleep(4.0)
        rate = (_wakeups(worker.pid) - before) / (time.monotonic() - t0)
    finally:
        worker.stop()
        dq.close()
    assert rate < 450, f"an idle worker woke {rate:.0f} times a second"


def test_a_directory_given_as_the_database_says_so(tmp_path: Path) -> None:
    """``--db sqlite:///jobs`` naming a directory said only SQLite's "unable to open
    database file" (and so does a new file in a read-only directory, which now says that
    the directory is not writable)."""
    (tmp_path / "jobs").mkdir()
    for verb in (["status"], ["migrate"]):
        out = durq_cli(*verb, "--db", f"sqlite:///{tmp_path / 'jobs'}", cwd=ROOT)
        assert out.returncode == 1
        assert "it is a directory, not a file" in out.stderr, out.stderr


def test_an_empty_job_list_says_so_with_its_filters(tmp_path: Path) -> None:
    """``durq jobs list --state failed`` (the README's dead-letter check) printed only the
    frame of an empty table when no job had failed."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    dq = durq.Durq(url)
    dq.enqueue("t", {})
    dq.close()
    out = durq_cli("jobs", "list", "--state", "failed", "--queue", "mail", "--db", url, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "no jobs with state=failed, queue=mail\n"
    assert "│ 1  │" in durq_cli("jobs", "list", "--db", url, cwd=ROOT).stdout
