"""The pytest plugin, loaded through its pytest11 entry point in a pytest run of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PG_URL, require_pg

USER_TESTS = textwrap.dedent(
    """
    import durq
    from durq.testing import assert_enqueued, drain

    def test_a_user_test(durq_app, durq_url, tmp_path):
        with open({out!r}, "w") as f:
            f.write(durq_url)

        @durq_app.task
        def welcome(user: str) -> str:
            return f"hello {{user}}"

        welcome.enqueue(user="ada")
        assert_enqueued(welcome, user="ada")
        assert drain(durq_app).succeeded == [1]
        assert durq_app.get(1).result == "hello ada"
    """
)


def run_user_tests(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    out = tmp_path / "url.txt"
    (tmp_path / "test_user.py").write_text(USER_TESTS.format(out=str(out)))
    env = {k: v for k, v in os.environ.items() if k not in ("DURQ_TEST_URL", "PYTEST_ADDOPTS")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc, out.read_text() if out.exists() else ""


def test_the_plugin_gives_a_temporary_sqlite_app(tmp_path: Path) -> None:
    proc, url = run_user_tests(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert url.startswith("sqlite:///") and "durq-test-" in url
    assert not Path(url.removeprefix("sqlite:///")).parent.exists()  # removed afterwards


@pytest.mark.skipif(sys.platform == "win32", reason="PostgreSQL tests run on Linux CI")
def test_the_plugin_gives_a_postgres_schema_and_drops_it(tmp_path: Path) -> None:
    require_pg()
    import psycopg

    proc, url = run_user_tests(tmp_path, f"--durq-url={PG_URL}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    schema = url.rsplit("schema=", 1)[1]
    assert schema.startswith("durq_test_")
    with psycopg.connect(PG_URL) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    assert row == (0,)
