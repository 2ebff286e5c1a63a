"""The podcast-mirror demo, end to end: real child processes, a real SQLite file, real signals.

The fake media host injects faults from a plan that is a pure function of the seed, so the
demo's JSON summary must match that plan exactly: what was mirrored, what failed for good
and why, how many retries it took, and how many requests the host served.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from examples.podcast_mirror.app import store_blob
from examples.podcast_mirror.fake_host import (
    FAULT_RATES,
    MAX_BODY,
    RETRIES_PER_FAULT,
    FakeHost,
    Fault,
    plan_faults,
)
from examples.podcast_mirror.feeds import FEED_NAMES, Episode, load_feed

import durq

REPO = Path(__file__).resolve().parents[2]
FAULT_KINDS = {kind for kind, _ in FAULT_RATES}


def pick_seed(episodes: list[Episode]) -> int:
    """The first seed whose plan gives ``episodes`` at least one fault of every kind."""
    for seed in range(1000):
        if {f.kind for f in plan_faults(seed, episodes).values()} >= FAULT_KINDS:
            return seed
    raise AssertionError("no seed exercises every fault kind")


def expected_summary(plan: dict[str, Fault]) -> dict[str, Any]:
    """What a complete run must report for a plan (the demo's ``totals``, minus bytes)."""
    kinds = Counter(f.kind for f in plan.values())
    failed = {f"http_{k}": kinds[k] for k in ("404", "410") if kinds[k]}
    retries = sum(RETRIES_PER_FAULT.get(k, 0) * n for k, n in kinds.items())
    return {
        "episodes": len(plan),
        "mirrored": len(plan) - sum(failed.values()),
        "failed": sum(failed.values()),
        "failed_reasons": failed,
        "pending": 0,
        "retries": retries,
        "requests": len(plan) + retries,  # one request per attempt
    }


@contextmanager
def demo(data_dir: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Start ``python -m examples.podcast_mirror --data-dir <data_dir> --json <args>``; always reaped."""
    cmd = [sys.executable, "-m", "examples.podcast_mirror", "--data-dir", str(data_dir), "--json"]
    proc = subprocess.Popen(
        [*cmd, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def finish(proc: subprocess.Popen[str], timeout: float, code: int = 0) -> dict[str, Any]:
    """Wait for the demo to exit ``code`` (0) with nothing on stderr but, after Ctrl-C, the
    line saying where it stopped; return its JSON summary."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == code, err
    if code == 130:
        assert err.startswith("interrupted: ") and "run the demo again" in err, err
        assert len(err.splitlines()) == 1, err
    else:
        assert err == "", "the console must stay clean (durq's events go to events.jsonl)"
    summary: dict[str, Any] = json.loads(out)
    return summary


def run_demo(data_dir: Path, *args: str, timeout: float = 45) -> dict[str, Any]:
    with demo(data_dir, *args) as proc:
        return finish(proc, timeout)


def totals(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary["totals"].items() if k != "bytes"}


def check_blobs(data_dir: Path) -> set[str]:
    """Every file under blobs/ is ``ab/abcdef…`` named by its own sha256; returns the names."""
    names = set()
    for path in (data_dir / "blobs").rglob("*"):
        if path.is_file():
            assert re.fullmatch(r"[0-9a-f]{64}", path.name), f"stray file {path}"
            assert path.parent.name == path.name[:2]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name
            names.add(path.name)
    return names


def results(data_dir: Path) -> tuple[set[str], int]:
    """(sha256 of every succeeded job's result, number of jobs), read with durq."""
    dq = durq.Durq(f"sqlite:///{data_dir / 'durq.db'}")
    try:
        succeeded = dq.jobs(state="succeeded", limit=10_000)
        every = dq.jobs(limit=10_000)
        return {j.result["sha256"] for j in succeeded}, len(every)
    finally:
        dq.close()


def count_succeeded(db: Path) -> int:
    """Succeeded jobs in a database another process is writing (read-only; 0 if not there yet)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(
                conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0]
            )
    except sqlite3.OperationalError:  # not migrated yet, or busy
        return 0


# -- fast checks of the pieces -----------------------------------------------------------


def test_feeds_parse_with_their_quirks() -> None:
    counts = {name: len(load_feed(name)) for name in FEED_NAMES}
    assert counts == {"podcasting20": 56, "cre": 60, "99pi": 212, "scotus": 489, "giantbomb": 730}
    pc20 = load_feed("podcasting20")
    assert sum(e.transcripts for e in pc20) == 47  # old podcast-namespace URI
    assert sum(e.chapters > 0 for e in load_feed("cre")) == 14  # inline psc:chapters
    assert all(e.original_url for e in load_feed("99pi"))  # feedburner:origEnclosureLink
    assert all(e.published.utcoffset() is not None for e in load_feed("giantbomb"))  # "PST"


def test_fake_host_serves_bytes_and_faults_per_attempt() -> None:
    episodes = load_feed("podcasting20")
    seed = pick_seed(episodes)
    plan = plan_faults(seed, episodes)
    by_kind = {f.kind: e for e in episodes for f in [plan[e.guid]]}
    with FakeHost(episodes, seed) as host:

        def get(episode: Episode, attempt: int) -> tuple[int, bytes]:
            path = urllib.parse.urlsplit(episode.url).path
            request = urllib.request.Request(
                host.base_url + path, headers={"X-Attempt": str(attempt)}
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as exc:
                with exc:
                    return exc.code, b""

        status, body = get(by_kind["ok"], 1)
        assert status == 200 and len(body) == min(by_kind["ok"].length, MAX_BODY)
        assert get(by_kind["ok"], 2)[1] == body  # deterministic
        assert [get(by_kind["503_twice"], a)[0] for a in (1, 2, 3)] == [503, 503, 200]
        assert [get(by_kind["429_once"], a)[0] for a in (1, 2)] == [429, 200]
        assert [get(by_kind["404"], a)[0] for a in (1, 2)] == [404, 404]
        assert host.requests_served == 9
        base = host.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/", timeout=2)  # shut down on exit


def test_store_blob_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    digest = store_blob(tmp_path / "blobs", b"hello")
    assert digest == hashlib.sha256(b"hello").hexdigest()
    assert (tmp_path / "blobs" / digest[:2] / digest).read_bytes() == b"hello"
    assert store_blob(tmp_path / "blobs", b"hello") == digest
    assert check_blobs(tmp_path) == {digest}  # no temp files left behind


# -- the demo as a user runs it ----------------------------------------------------------


@pytest.mark.slow
def test_demo_matches_the_fault_plan_and_a_rerun_downloads_nothing(tmp_path: Path) -> None:
    episodes = load_feed("podcasting20")
    seed = pick_seed(episodes)
    want = expected_summary(plan_faults(seed, episodes))

    first = run_demo(tmp_path, "--feeds", "podcasting20", "--seed", str(seed))
    assert totals(first) == want
    assert first["feeds"]["podcasting20"]["requests"] == want["requests"]
    assert first["requests_served"] == want["requests"]
    assert first["complete"] is True
    blobs = check_blobs(tmp_path)
    shas, jobs = results(tmp_path)
    assert jobs == len(episodes)
    assert blobs == shas and len(blobs) == want["mirrored"]

    second = run_demo(tmp_path, "--feeds", "podcasting20", "--seed", str(seed))
    assert second["requests_served"] == 0
    assert totals(second) == {**want, "requests": 0}
    assert second["totals"]["bytes"] == first["totals"]["bytes"]
    assert check_blobs(tmp_path) == blobs
    assert results(tmp_path) == (shas, jobs)


@pytest.mark.slow
def test_ctrl_c_then_rerun_finishes_everything_and_loses_nothing(tmp_path: Path) -> None:
    feed = "scotus"  # 489 episodes: long enough to interrupt part way
    episodes = load_feed(feed)
    seed = 7
    want = expected_summary(plan_faults(seed, episodes))

    with demo(tmp_path, "--feeds", feed, "--seed", str(seed), "--concurrency", "2") as proc:
        deadline = time.monotonic() + 30
        while count_succeeded(tmp_path / "durq.db") < 40:
            assert proc.poll() is None, "the demo ended before it could be interrupted"
            assert time.monotonic() < deadline, "no progress within 30 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        first = finish(proc, timeout=30, code=130)  # the shell's code for Ctrl-C
    assert first["complete"] is False and first["totals"]["pending"] > 0
    assert 40 <= first["totals"]["mirrored"] < want["mirrored"]
    check_blobs(tmp_path)

    second = run_demo(tmp_path, "--feeds", feed, "--seed", str(seed))
    assert totals(second) == {**want, "requests": second["requests_served"]}
    # Nothing was downloaded twice: the two runs together made exactly the planned requests.
    assert first["requests_served"] + second["requests_served"] == want["requests"]
    blobs = check_blobs(tmp_path)
    shas, jobs = results(tmp_path)
    assert jobs == len(episodes)
    assert blobs == shas and len(blobs) == want["mirrored"]
