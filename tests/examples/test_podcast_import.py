"""The podcast import executor (write-up 001) end to end: real worker processes, real SQLite
files (durq's and the product's), and a fake host on loopback that serves the real feeds,
records every request and fails on demand.

Each test names the part of the write-up it checks. Import backoff runs at 1/100 of its
length (``--time-scale 0.01``: 5 s -> 50 ms, 20 s -> 200 ms, 80 s -> 0.8 s, 320 s -> 3.2 s).
Tests whose name contains ``batch`` need durq batches (``dq.batch``/``dq.batch_status``).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from examples.podcast_import import host, importer, product

import durq
from durq.testing import drain
from tests.conftest import Clock
from tests.support.procs import ROOT, wait_for

SCALE = 0.01


class Worker:
    """``python -m examples.podcast_import work`` as a child process."""

    def __init__(self, data: Path, host_url: str, scale: float = SCALE) -> None:
        self.out = data / f"worker-{time.monotonic_ns()}.out"
        self._out = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "examples.podcast_import", "--data-dir", str(data),
             "--host-url", host_url, "work", "--lease", "10", "--time-scale", str(scale)],
            cwd=ROOT, stdout=self._out, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        found = [json.loads(x) for x in self.out.read_text().splitlines() if x.startswith("{")]
        return [e for e in found if name in (None, e["event"])]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._out.close()


def cli(data: Path, host_url: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "examples.podcast_import", "--data-dir", str(data),
         "--host-url", host_url, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


@pytest.fixture
def fake() -> Iterator[tuple[host.HostService, str]]:
    server, _ = host.serve()
    try:
        yield server.svc, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def query(data: Path, sql: str, *args: Any) -> list[dict[str, Any]]:
    with product.connect(data / "product.db") as conn:
        return [dict(r) for r in conn.execute(sql, args)]


def paths(svc: host.HostService, feed: str, n: int) -> list[str]:
    return [urlsplit(i["audio_url"]).path for i in importer.read_feed(svc.feeds[feed])[:n]]


def import_row(data: Path, import_id: int = 1) -> dict[str, Any]:
    rows = query(data, "SELECT * FROM imports WHERE id = ?", import_id)
    return rows[0] if rows else {}


def items(data: Path, import_id: int = 1) -> list[tuple[str, str | None]]:
    rows = query(data, "SELECT status, reason FROM import_items WHERE import_id = ? ORDER BY id",
                 import_id)  # fmt: skip
    return [(r["status"], r["reason"]) for r in rows]


# -- unit: the matcher, the schedule, the backoff -----------------------------------------


def test_title_similarity_and_candidate_rules() -> None:
    """'Disambiguation rules': ±24 h window, linked GUIDs excluded, Sørensen-Dice bigrams with
    top >= 0.8 and margin >= 0.15."""
    assert product.dice("night", "nacht") == pytest.approx(0.25)  # 1 shared bigram of 4 + 4
    assert product.dice("Episode 57", "episode 57") == 1.0
    day, t = 24 * 3600.0, 1_000_000.0
    a = product.Candidate("a", "Episode 57: Rebel Rubes", t - day + 1)
    b = product.Candidate("b", "Episode 58: Something Else", t + 3600)
    far = product.Candidate("far", "Episode 57: Rebel Rubes", t + day + 1)
    assert product.pick(t, "x", [far], set()) == (None, {"candidates": 0})
    assert product.pick(t, "unrelated", [b, far], set())[0] == b  # one candidate wins as is
    won, info = product.pick(t, "Episode 57: Rebel Rubes", [a, b], set())
    assert won == a and info["disambiguation"] == "matched" and info["top_score"] == 1.0
    assert product.pick(t, "Episode 57: Rebel Rubes", [a, b], {"a"})[0] == b  # a is linked
    near = product.Candidate("c", "Episode 57: Rebel Rubes!", t)
    lost, info = product.pick(t, "Episode 57: Rebel Rubes", [a, near], set())
    assert lost is None and info["disambiguation"] == "still_ambiguous"  # margin < 0.15
    low, info = product.pick(t, "Totally different", [a, b], set())
    assert low is None and info["top_score"] < 0.8


def test_backoff_formula_and_link_schedule() -> None:
    """'Backoff formula' (base = min(900, 5*4^(attempts-1)), jitter in [0, min(30, base/4)],
    floored) and the link 'Backoff schedule' (5 min, 15 min, 1 h, 6 h, 24 h, then none)."""
    delay = importer.import_backoff()
    for attempt, base in [(1, 5), (2, 20), (3, 80), (4, 320), (5, 900), (6, 900)]:
        seen = {delay(attempt, None) for _ in range(200)}
        assert min(seen) >= base and max(seen) <= base + min(30, base / 4)
        assert all(d == int(d) for d in seen)
    assert [importer.next_link_delay(a) for a in range(6)] == [
        300.0, 900.0, 3600.0, 21600.0, 86400.0, None]  # fmt: skip


# -- link attempts --------------------------------------------------------------------------


def _seed_podcast(db: Path, pid: str, feed: str, email: str = "o@example.org") -> None:
    product.init(db)
    with product.connect(db) as conn, product.write(conn):
        conn.execute("INSERT INTO podcasts VALUES (?, ?, ?, 'external', ?)",
                     (pid, pid, email, f"/feeds/{feed}.xml"))  # fmt: skip


def _seed_episode(db: Path, pid: str, title: str, **cols: Any) -> int:
    values = {"podcast_id": pid, "title": title, "external_link_status": "pending", **cols}
    with product.connect(db) as conn, product.write(conn):
        cur = conn.execute(f"INSERT INTO episodes ({', '.join(values)}) VALUES "
                           f"({', '.join('?' for _ in values)})", tuple(values.values()))  # fmt: skip
        return int(cur.lastrowid or 0)


def test_link_retries_on_the_schedule_then_unmatched_on_an_injected_clock(
    tmp_path: Path, fake: tuple[host.HostService, str], clock: Clock
) -> None:
    """'Backoff schedule' and the failure table ('0 or >1 candidates with no title winner:
    retry until schedule exhausted, then unmatched'), on durq's injected clock: each retry is
    a self-enqueue with a delay, due exactly 5 min, 15 min, 1 h, 6 h, 24 h later."""
    svc, url = fake
    importer.configure(url, tmp_path / "product.db")
    _seed_podcast(tmp_path / "product.db", "pc20", "podcasting20")
    ep = _seed_episode(tmp_path / "product.db", "pc20", "Episode 99: Not Out Yet")
    dq = importer.create_app(f"sqlite:///{tmp_path / 'durq.db'}", clock=clock)
    dq.get_task("attempt_link").enqueue(
        episode_id=ep, podcast_id="pc20", target_published_at="2030-01-01T12:00:00+00:00"
    )
    gaps = []
    try:  # durq.testing.drain runs each due attempt here; the clock decides what is due
        for attempt in range(6):
            assert len(drain(dq, skip_backoff=False).succeeded) == 1
            assert drain(dq, skip_backoff=False).ran == []  # the next one is not due yet
            waiting = [j for j in dq.jobs(task="attempt_link") if j.state != "succeeded"]
            if attempt == 5:
                assert waiting == []
                break
            (nxt,) = waiting
            assert nxt.payload["attempt"] == attempt + 1
            gaps.append(nxt.run_at - clock.now)
            clock.advance(nxt.run_at - clock.now)
    finally:
        dq.close()
    assert gaps == [300.0, 900.0, 3600.0, 21600.0, 86400.0]
    (row,) = query(tmp_path, "SELECT external_link_status FROM episodes WHERE id = ?", ep)
    assert row["external_link_status"] == "unmatched"
    assert len(svc.requests("feed")) == 6


def test_link_tenant_guard_and_message_routing_with_real_workers(
    tmp_path: Path, fake: tuple[host.HostService, str], workers: list[Worker]
) -> None:
    """'external-episode-link consumer': linked by pubDate proximity; 'Tenant guard' (acked,
    logged, never applied); 'Message routing' (unknown types logged and acknowledged; in durq
    a job naming an unknown task stays queued and is reported stranded, never run nor lost)."""
    svc, url = fake
    db = tmp_path / "product.db"
    _seed_podcast(db, "pc20", "podcasting20")
    _seed_podcast(db, "other", "cre")
    feed = importer.read_feed(svc.feeds["podcasting20"])
    first = feed[0]  # the newest: its neighbour is a week older
    at = (datetime.fromisoformat(first["published"]) + timedelta(hours=3)).isoformat()
    mine = _seed_episode(db, "pc20", first["title"])
    theirs = _seed_episode(db, "pc20", feed[1]["title"])
    cli(tmp_path, url, "link", str(mine), "--podcast", "pc20", "--at", at)
    message = {"type": "attempt_link", "episode_id": theirs, "podcast_id": "other",
               "target_published_at": at, "attempt": 0}  # fmt: skip
    assert cli(tmp_path, url, "send", json.dumps(message))[-1]["event"] == "message_routed"
    dropped = cli(tmp_path, url, "send", json.dumps({"type": "transcode", "episode_id": 1}))
    assert [e["event"] for e in dropped] == ["unknown_message_type", "message_dropped"]
    stranger = durq.Durq(f"sqlite:///{tmp_path / 'durq.db'}")
    try:
        job = stranger.enqueue("transcode", {"episode_id": 1}, queue=importer.LINK_QUEUE)
        workers.append(Worker(tmp_path, url))
        w = workers[0]
        wait_for(lambda: len(w.events("external_link_attempt")) == 2, 30)
        outcomes = {e["episode_id"]: e for e in w.events("external_link_attempt")}
        assert outcomes[mine]["outcome"] == "linked" and outcomes[mine]["guid"] == first["guid"]
        assert outcomes[theirs]["outcome"] == "tenant_mismatch"
        assert outcomes[theirs]["level"] == "error"
        assert outcomes[theirs]["episode_podcast_id"] == "pc20"
        rows = {r["id"]: r for r in query(tmp_path, "SELECT * FROM episodes")}
        assert (rows[mine]["external_guid"], rows[mine]["external_link_status"],
                rows[mine]["external_link_method"]) == (first["guid"], "linked", "auto")  # fmt: skip
        assert rows[theirs]["external_guid"] is None
        assert rows[theirs]["external_link_status"] == "pending"
        wait_for(lambda: bool(stranger.status()["stranded"]), 10)
        assert stranger.status()["stranded"] == [
            {"queue": importer.LINK_QUEUE, "task": "transcode", "jobs": 1}]  # fmt: skip
        assert job.refresh().state == "queued" and job.attempts == 0
    finally:
        stranger.close()


# -- imports (need durq batches) ------------------------------------------------------------


def _finished(data: Path, import_id: int = 1) -> bool:
    return import_row(data, import_id).get("status") not in (None, "running")


def test_batch_back_catalogue_import_classifies_errors_and_finalises_once(
    tmp_path: Path, fake: tuple[host.HostService, str], workers: list[Worker]
) -> None:
    """'Retry & terminalisation' and the 'Failure modes' table: 404/410 and oversize fail at
    once, 5xx retries with the backoff formula, an unclassified throw releases the item and is
    retried, the final (5th) attempt terminalises; 'Finalisation side effects' fire once."""
    svc, url = fake
    cli(tmp_path, url, "podcast", "cre", "--feed", "cre")
    p = paths(svc, "cre", 7)
    kinds = ["ok", "404", "410", "oversize", "503x2", "html1", "503"]
    svc.faults.update({path: k for path, k in zip(p, kinds, strict=True) if k != "ok"})
    cli(tmp_path, url, "import", "cre", "--limit", "7")
    workers.append(Worker(tmp_path, url))
    wait_for(lambda: _finished(tmp_path), 60)
    assert items(tmp_path) == [
        ("imported", None), ("failed", "http_404"), ("failed", "http_410"),
        ("failed", "skipped_oversize"), ("imported", None), ("imported", None),
        ("failed", "retries_exhausted")]  # fmt: skip
    assert [len(svc.requests("media", x)) for x in p] == [1, 1, 1, 1, 3, 2, 5]
    times = [r["at"] for r in svc.requests("media", p[6])]
    for attempt, (a, b) in enumerate(itertools.pairwise(times), start=1):
        assert b - a >= min(900, 5 * 4 ** (attempt - 1)) * SCALE * 0.95
    imp = import_row(tmp_path)
    assert (imp["status"], imp["finalised"]) == ("partial", 1)
    wait_for(lambda: len(svc.requests("email")) == 1, 10)
    time.sleep(0.5)
    (mail,) = svc.requests("email")
    assert mail["body"]["outcome"] == "partial"
    assert mail["body"]["counts"] == {"succeeded": 3, "failed": 4}
    assert len(svc.requests("rss")) == 1
    assert len(query(tmp_path, "SELECT id FROM episodes WHERE podcast_id = 'cre'")) == 3
    dq = durq.Durq(f"sqlite:///{tmp_path / 'durq.db'}", migrate=False)
    try:
        assert dq.batch_status(imp["batch_id"]).fired == 1
        kinds_seen = {j.payload["import_item_id"]: [e.kind for e in j.errors]
                      for j in dq.jobs(task="import_item")}  # fmt: skip
    finally:
        dq.close()
    assert kinds_seen[2] == ["permanent:durq.Permanent"]
    assert kinds_seen[6] == ["transient"]  # unclassified: durq's default is to retry
    assert kinds_seen[7] == ["transient:durq.Transient"] * 5


def test_batch_hosting_migration_merges_and_cuts_over_only_when_completed(
    tmp_path: Path, fake: tuple[host.HostService, str], workers: list[Worker]
) -> None:
    """'Hosting-migration merge mode' (overwrite / per config / fill-if-missing / never) and
    'Hosting-migration cutover': only on completed; after the failed item is retried and lands,
    the batch completes again, the cut-over happens and RSS invalidation + e-mail are sent."""
    svc, url = fake
    db = tmp_path / "product.db"
    cli(tmp_path, url, "podcast", "pc20", "--feed", "podcasting20")
    feed = importer.read_feed(svc.feeds["podcasting20"])[:4]
    old = {"description": "my words", "show_notes": "my notes", "audio_url": "old.mp3",
           "episode_number": 7, "external_link_status": "linked"}  # fmt: skip
    kept = _seed_episode(db, "pc20", "My title 0", external_guid=feed[0]["guid"],
                         cover_image_url="mine.jpg", **old)  # fmt: skip
    filled = _seed_episode(db, "pc20", "My title 1", external_guid=feed[1]["guid"], **old)
    down = _seed_episode(db, "pc20", "My title 2", external_guid=feed[2]["guid"], **old)
    svc.faults[urlsplit(feed[2]["audio_url"]).path] = "503"
    cli(tmp_path, url, "import", "pc20", "--migration", "--use-rss-titles", "--limit", "4")
    workers.append(Worker(tmp_path, url))
    wait_for(lambda: _finished(tmp_path), 60)
    assert import_row(tmp_path)["status"] == "partial"
    assert items(tmp_path) == [("merged", None), ("merged", None),
                               ("failed", "retries_exhausted"), ("imported", None)]  # fmt: skip
    wait_for(lambda: len(svc.requests("email")) == 1, 10)
    (hosting,) = query(tmp_path, "SELECT hosting_type FROM podcasts WHERE id = 'pc20'")
    assert hosting["hosting_type"] == "external" and svc.requests("rss") == []
    eps = {r["id"]: r for r in query(tmp_path, "SELECT * FROM episodes")}
    for ep_id in (kept, filled):
        e, item = eps[ep_id], feed[0 if ep_id == kept else 1]
        assert e["title"] == item["title"]  # use_rss_titles
        assert e["description"] == "my words"  # use_rss_descriptions off
        assert e["show_notes"] == "my notes"  # never touched
        assert e["episode_guid"] == item["guid"] and e["published_at"] == item["published"]
        assert e["audio_url"].endswith(f"/e/{ep_id}/audio/migrated.mp3")
        assert e["episode_number"] == 7  # fill-if-missing: it was not missing
    assert eps[kept]["cover_image_url"] == "mine.jpg"
    assert eps[filled]["cover_image_url"] == feed[1]["image"]
    assert eps[down]["audio_url"] == "old.mp3" and eps[down]["title"] == "My title 2"
    (new,) = [e for e in eps.values() if e["id"] not in (kept, filled, down)]
    assert new["external_guid"] == feed[3]["guid"] == new["episode_guid"]
    svc.faults.clear()
    assert cli(tmp_path, url, "retry", "1")[-1]["items"] == [3]
    wait_for(lambda: import_row(tmp_path)["status"] == "completed", 30)
    wait_for(lambda: len(svc.requests("email")) == 2, 10)
    (hosting,) = query(tmp_path, "SELECT hosting_type FROM podcasts WHERE id = 'pc20'")
    assert hosting["hosting_type"] == "podcasterplus"
    (rss,) = svc.requests("rss")
    assert rss["body"]["type"] == "import.completed" and rss["body"]["podcast_slug"] == "pc20"
    assert [m["body"]["outcome"] for m in svc.requests("email")] == ["partial", "completed"]
    assert import_row(tmp_path)["finalised"] == 2
    assert len(workers[0].events("hosting_migration_cutover")) == 1


def test_batch_best_effort_side_effects_fail_without_undoing_anything(
    tmp_path: Path, fake: tuple[host.HostService, str], workers: list[Worker]
) -> None:
    """'Finalisation side effects': RSS invalidation and e-mail failures are logged and
    swallowed; a cut-over that throws marks the import failed ('Hosting cutover failed: ...')
    and sends neither."""
    svc, url = fake
    db = tmp_path / "product.db"
    cli(tmp_path, url, "podcast", "cre", "--feed", "cre")
    cli(tmp_path, url, "podcast", "pc20", "--feed", "podcasting20")
    with product.connect(db) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE UPDATE OF hosting_type ON podcasts "
                     "BEGIN SELECT RAISE(ABORT, 'hosting is locked'); END")  # fmt: skip
    svc.failing.update({"email", "rss"})
    cli(tmp_path, url, "import", "cre", "--limit", "3")
    workers.append(Worker(tmp_path, url))
    wait_for(lambda: _finished(tmp_path, 1), 30)
    w = workers[0]
    wait_for(lambda: bool(w.events("completion_email_failed")), 10)
    assert import_row(tmp_path, 1)["status"] == "completed"
    assert items(tmp_path, 1) == [("imported", None)] * 3
    assert len(w.events("rss_invalidation_send_failed")) == 1
    svc.failing.clear()
    cli(tmp_path, url, "import", "pc20", "--migration", "--limit", "2")
    wait_for(lambda: _finished(tmp_path, 2), 30)
    wait_for(lambda: bool(w.events("hosting_migration_cutover_failed")), 10)
    imp = import_row(tmp_path, 2)
    assert imp["status"] == "failed"
    assert imp["last_error"] == "Hosting cutover failed: hosting is locked"
    assert items(tmp_path, 2) == [("imported", None)] * 2
    time.sleep(0.5)
    assert [r["body"]["import_id"] for r in svc.requests("email")] == [1]  # none for import 2
