"""Hypothesis fuzzing of the CLI's arguments (click's CliRunner, in process).

The property: whatever the ids, queue names, task names and option values, a verb never
ends in a Python traceback. It exits 0, or 1 (durq refused: ``durq: error: ...``) or 2
(a usage error from click or durq), and its error is one line.

``worker`` and ``verify`` are left out (they start processes and run until stopped);
``--db`` always names the test's own database so that nothing is created elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durq
from durq.cli import cli

# any code point except the ones argv cannot hold (NUL); lone surrogates are what a
# non-UTF-8 byte in argv becomes under Python's surrogateescape
chars = st.characters(codec=None, min_codepoint=1, max_codepoint=0x10FFFF)
text = st.text(chars, max_size=30)
numberish = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats().map(repr),
    st.sampled_from(["0", "-1", "1e3", "0x10", " 1", "9" * 40, "", "nan", "inf", "-0", "1_0"]),
    text,
)
ids = numberish
names = st.one_of(text, st.sampled_from(["default", "q", "t", "x" * 300, "\udc80", "a\nb"]))
states = st.one_of(
    st.sampled_from(["queued", "running", "succeeded", "failed", "scheduled", "cancelled"]), text
)
payload = st.one_of(
    text,
    st.sampled_from(["{}", "[]", "null", '{"a": NaN}', '{"a": 1e999}', '{"a": "\\udc80"}']),
    st.sampled_from(['{"a": ' + "[" * 3000 + "]" * 3000 + "}", '{"a": 1' + "0" * 5000 + "}"]),
)


def opts(*pairs: tuple[str, st.SearchStrategy[str]]) -> st.SearchStrategy[list[str]]:
    """Any subset of the options, each with a fuzzed value, flattened into argv."""
    chosen = [st.one_of(st.just([]), value.map(lambda v, f=flag: [f, v])) for flag, value in pairs]
    return st.tuples(*chosen).map(lambda parts: [a for part in parts for a in part])


flags = st.lists(st.sampled_from(["--json", "--yes"]), max_size=1)

commands = st.one_of(
    st.tuples(st.just(["jobs", "show"]), ids.map(lambda i: [i])),
    st.tuples(st.sampled_from([["retry"], ["cancel"]]), st.lists(ids, min_size=0, max_size=3)),
    st.tuples(
        st.just(["jobs", "list"]),
        opts(("--queue", names), ("--task", names), ("--limit", numberish), ("--state", states)),
    ),
    st.tuples(
        st.just(["enqueue"]),
        st.tuples(
            names.map(lambda n: [n]),
            st.lists(st.tuples(text, text).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=2),
            opts(
                ("--queue", names),
                ("--delay", numberish),
                ("--priority", numberish),
                ("--max-attempts", numberish),
                ("--key", names),
                ("--payload", payload),
            ),
        ).map(lambda t: [*t[0], *t[1], *t[2]]),
    ),
    st.tuples(
        st.just(["purge"]), st.tuples(names, opts(("--state", states))).map(lambda t: [t[0], *t[1]])
    ),
    st.tuples(st.just(["status"]), st.just([])),
).map(lambda t: [*t[0], *t[1]])


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "jobs.db"
    app = durq.Durq(str(path))
    a = app.enqueue("t", {"n": 1})
    app.enqueue("t", {"n": 2}, queue="q")
    app.cancel(a.id)
    app.close()
    return str(path)


def test_cli_arguments_never_end_in_a_traceback(db: str, tmp_path: Path) -> None:
    runner = CliRunner()

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(argv=commands, extra=flags)
    def check(argv: list[str], extra: list[str]) -> None:
        args = [*argv, *extra, "--db", db]
        result = runner.invoke(cli, args, env={"DURQ_URL": None}, catch_exceptions=True)
        err = result.stderr
        where = f"durq {args!r:.1000} exited {result.exit_code}\nstdout: {result.stdout:.1000}"
        where += f"\nstderr: {err:.1000}"
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{where}\n{result.exc_info}"
        )
        assert "Traceback" not in result.output + err, where
        assert result.exit_code in (0, 1, 2), where
        if result.exit_code == 0:
            return
        if "--json" in args and result.exit_code == 1 and argv[0] in ("retry", "cancel"):
            # --json reports each job's refusal in the JSON on stdout
            assert all("error" in r for r in json.loads(result.stdout) if not r["ok"]), where
            return
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines, f"no error message: {where}"
        # click: "Usage: ... / Try ... / Error: <one line>"; durq: "durq: error: <one line>";
        # retry/cancel/adopt: one "durq: error: job N: ..." line per job refused
        errors = [line for line in lines if line.startswith(("Error:", "durq: error:", "job "))]
        assert errors, where
        per_job = argv[0] in ("retry", "cancel", "adopt") and result.exit_code == 1
        if per_job and all(e.startswith("durq: error: job ") for e in errors):
            assert errors == lines, f"a refusal that is not one line per job: {where}"
        elif errors[0].startswith(("Error:", "durq: error:")):
            assert errors == lines[-1:], f"the error is not one last line: {where}"

    check()


def test_a_job_id_that_is_not_a_number_says_what_a_job_id_is(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    durq.Durq(db).store.migrate()
    for args in (["jobs", "show", "abc"], ["cancel", "0"], ["jobs", "show", "1.5"]):
        got = CliRunner().invoke(cli, [*args, "--db", db])
        assert got.exit_code == 2, (args, got.output)
        assert "is not a job id (a whole number from 1" in got.output, (args, got.output)
