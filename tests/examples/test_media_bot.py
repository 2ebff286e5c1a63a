"""The media bot (write-up 000) end to end: real bot processes, a real SQLite file, real
signals, a fake chat API on loopback that records every call, and a fake ``yt-dlp`` on PATH
(a Python script in a temp bin dir) that records every run and fails as scripted per URL.

Each test names the paragraph of the write-up it checks. Backoff runs at 1/100 of its length.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from examples.media_bot import chat_api, fake_ytdlp
from examples.media_bot.bot import FILE_HOLDER, MediaBot

import durq
from durq.blobs import BlobStore
from tests.support.procs import ROOT, wait_for

BASE = "https://vid.example"


class World:
    """The outside world of one test: the fake chat API and the fake downloader on PATH."""

    def __init__(self, tmp: Path) -> None:
        self.data = tmp / "data"
        self.bin = fake_ytdlp.install(tmp / "bin").parent
        self.calls_file = tmp / "ytdlp.jsonl"
        self.env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_YTDLP_LOG": str(self.calls_file), "PYTHONPATH": str(ROOT)}  # fmt: skip
        self.server, _ = chat_api.serve()
        self.svc = self.server.chat
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.bots: list[subprocess.Popen[bytes]] = []
        self._mid = 0

    def bot(self, *args: str, lease: float = 5.0) -> subprocess.Popen[bytes]:
        out = open(self.data.parent / f"bot-{len(self.bots)}.out", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "examples.media_bot", "--data-dir", str(self.data), "serve",
             "--chat-url", self.url, "--lease", str(lease), "--time-scale", "0.01", *args],
            cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        out.close()
        self.bots.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.bots:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        self.server.shutdown()
        self.server.server_close()

    def say(self, chat_id: int, text: str) -> None:
        self._mid += 1
        message = {"message_id": self._mid, "chat": {"id": chat_id}, "text": text}
        self.svc.push([{"message": message}])

    def log(self, method: str, chat_id: int | None = None) -> list[dict[str, Any]]:
        with self.svc.cond:
            return [e for e in self.svc.log if e["method"] == method
                    and chat_id in (None, e.get("chat_id"))]  # fmt: skip

    def status_texts(self, chat_id: int) -> list[list[str]]:
        """Each status message sent to the chat: its text, then every edit."""
        with self.svc.cond:
            return [list(self.svc.texts[e["message_id"]]) for e in self.svc.log
                    if e["method"] == "sendMessage" and e["chat_id"] == chat_id]  # fmt: skip

    def calls(self, mode: str | None = None, vid: str | None = None) -> list[dict[str, Any]]:
        """Finished downloader runs (``mode`` meta, download or other)."""
        if not self.calls_file.exists():
            return []
        found = [json.loads(x) for x in self.calls_file.read_text().splitlines()]
        return [c for c in found if c["event"] == "call" and mode in (None, c["mode"])
                and vid in (None, c.get("id"))]  # fmt: skip

    def jobs(self) -> dict[int, durq.Job]:
        """The bot's jobs, read with the durq API ({} until the bot created its database)."""
        dq = durq.Durq(f"sqlite:///{self.data / 'durq.db'}", migrate=False)
        try:
            return {j.id: j for j in dq.jobs(queue="media", limit=1000)}
        except durq.StoreError:
            return {}
        finally:
            dq.close()

    def settled(self, n: int) -> bool:
        jobs = self.jobs()
        finished = ("succeeded", "failed", "cancelled")
        return len(jobs) >= n and all(j.state in finished for j in jobs.values())


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.stop()


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:  # at equal times an end (-1) sorts before a start
        now += step
        most = max(most, now)
    return most


def test_three_downloads_at_once_shared_with_the_inline_path(world: World) -> None:
    """'Durable, parallel job queue': one job per URL message, up to 3 in parallel, and
    'yt-dlp concurrency is capped at 3 … so inline queries count against the same budget'."""
    world.bot()
    for n in range(6):
        world.say(100 + n, f"look at this {BASE}/ok/q{n}?sleep=0.6 !")
    world.svc.push([{"inline_query": {"id": f"i{n}", "query": f"{BASE}/ok/i{n}?sleep=0.6"}}
                    for n in range(3)])  # fmt: skip
    wait_for(lambda: world.settled(6) and len(world.log("answerInlineQuery")) == 3, 40)
    jobs = world.jobs()
    assert len(jobs) == 6 and all(j.state == "succeeded" for j in jobs.values())
    for n in range(6):
        assert len(world.log("sendVideo", 100 + n)) == 1
    runs = world.calls()
    assert {c["via"] for c in runs} == {"job", "inline"}
    overlap = max_overlap([(c["start"], c["end"]) for c in runs])
    assert overlap == 3, overlap  # never more than 3, across both paths; and 3 reached


def test_sigkill_restart_recovers_persisted_jobs_in_fifo_order(world: World) -> None:
    """'At-least-once delivery … a restart never loses a video' and the pool 'rebuilds its
    queue from the jobs table on boot, in FIFO order'; the restart/recovery e2e seam."""
    first = world.bot(lease=1.0)
    for n in range(6):
        world.say(200 + n, f"{BASE}/ok/r{n}?sleep=1.2")
    wait_for(lambda: len(world.calls("meta")) >= 3 and len(world.jobs()) == 6, 20)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    before = world.jobs()
    assert sorted(j.state for j in before.values()) == ["queued"] * 3 + ["running"] * 3
    assert world.log("sendVideo") == []
    time.sleep(1.5)  # past the lease: the restarted bot recovers the three at boot
    world.bot(lease=1.0)
    wait_for(lambda: world.settled(6), 40)
    after = world.jobs()
    assert all(j.state == "succeeded" for j in after.values())
    by_start = sorted(after.values(), key=lambda j: (j.started_at or 0, j.id))
    assert [j.id for j in by_start] == sorted(after)  # FIFO: claimed in id order
    assert sorted(j.attempts for j in after.values()) == [1, 1, 1, 2, 2, 2]
    for n in range(6):
        assert len(world.log("sendVideo", 200 + n)) == 1  # each video delivered
        # one status message per job, also across the kill (its id is a durq step)
        assert [m[-1] for m in world.status_texts(200 + n)] == [f"✅ Video r{n}"]


def test_transient_failures_retry_in_one_edited_message_permanent_ones_fail_at_once(
    world: World,
) -> None:
    """'Failure classification + per-attempt reporting': transient errors retried up to 3
    attempts, 'each attempt edits one message … retrying (attempt X of Y)… → a terminal 💥';
    unsupported URL and private video fail fast."""
    world.bot()
    world.say(301, f"{BASE}/flaky2/a")  # 503 twice, then fine
    world.say(302, f"{BASE}/flaky5/b")  # 503 every time
    world.say(303, "https://elsewhere.example/watch?v=1")
    world.say(304, f"{BASE}/private/c")
    wait_for(lambda: world.settled(4), 40)
    retrying = "retrying (attempt {} of 3)…"
    [flaky2] = world.status_texts(301)
    assert len(flaky2) == 4 and flaky2[-1] == "✅ Video a"
    assert all(t.endswith(retrying.format(k)) for t, k in zip(flaky2[1:3], (2, 3), strict=True))
    assert all("HTTP Error 503" in t for t in flaky2[1:3])
    [flaky5] = world.status_texts(302)
    assert len(flaky5) == 4 and flaky5[2].endswith(retrying.format(3))
    assert flaky5[-1].startswith("💥") and "HTTP Error 503" in flaky5[-1]
    [unsupported] = world.status_texts(303)
    assert unsupported[1:] == ["💥 ERROR: Unsupported URL: https://elsewhere.example/watch?v=1"]
    [private] = world.status_texts(304)
    assert len(private) == 2 and "Private video" in private[1]
    states = {j.payload["chat_id"]: j for j in world.jobs().values()}
    assert (states[301].state, states[301].attempts) == ("succeeded", 3)
    assert (states[302].state, states[302].attempts) == ("failed", 3)
    for chat in (303, 304):
        assert (states[chat].state, states[chat].attempts) == ("failed", 1)
        err = states[chat].last_error
        assert err is not None and err.kind.startswith("permanent")
    assert len(world.calls("meta", "a")) == 3 and len(world.calls("meta", "b")) == 3
    assert len(world.calls("meta", "c")) == 1 and len(world.log("sendVideo")) == 1


def test_large_files_are_parked_and_confirm_races_cancel(world: World) -> None:
    """'Confirmation is one atomic claim … Confirm and cancel both DELETE the same row, so
    exactly one wins … and the loser cleanly reports the confirmation gone'."""
    world.bot()
    for n in range(6):
        world.say(400 + n, f"{BASE}/big/b{n}")
    wait_for(lambda: sum(j.state == "parked" for j in world.jobs().values()) == 6, 30)
    parked = {j.payload["chat_id"]: j.id for j in world.jobs().values() if j.state == "parked"}

    def asked(chat: int) -> bool:  # the job parks its download, then edits the status
        [status] = world.status_texts(chat)
        return "80 MB. Download it?" in status[-1]

    wait_for(lambda: all(asked(chat) for chat in parked), 30, what="the six questions")
    assert world.calls("download") == []
    presses = [{"callback_query": {"id": f"{a}{j}", "data": f"{a}:{j}"}}
               for j in parked.values() for a in ("confirm", "cancel")]  # fmt: skip
    random.Random(0).shuffle(presses)
    world.svc.push(presses)  # one batch: the bot handles them at the same time
    wait_for(lambda: len(world.log("answerCallbackQuery")) == 12 and world.settled(12), 30)
    answers = {e["callback_query_id"]: e["text"] for e in world.log("answerCallbackQuery")}
    jobs = world.jobs()
    outcomes = set()
    for chat, job_id in parked.items():
        confirm, cancel = answers[f"confirm{job_id}"], answers[f"cancel{job_id}"]
        lost = [t for t in (confirm, cancel) if t.startswith("Too late")]
        assert len(lost) == 1, (confirm, cancel)  # exactly one wins; the loser is told
        won = "confirm" if cancel in lost else "cancel"
        outcomes.add(won)
        vid = f"b{chat - 400}"
        if won == "confirm":
            assert jobs[job_id].state == "succeeded" and len(world.log("sendVideo", chat)) == 1
            assert len(world.calls("download", vid)) == 1
        else:
            assert jobs[job_id].state == "cancelled" and world.log("sendVideo", chat) == []
            assert world.calls("download", vid) == []
    print("winners:", outcomes)


def test_the_same_video_is_downloaded_once_and_its_bytes_follow_the_file_id_rule(
    world: World,
) -> None:
    """'Content-addressed blob store': keyed by extractor:id:format_id, the file_id recorded
    on the blob, and 'releaseBlob deletes the bytes only when no row references the key and
    file_id IS NULL'; a GC'd blob is re-downloaded."""
    world.bot()
    for chat, url in ((501, f"{BASE}/ok/cat?sleep=0.5"), (502, f"{BASE}/ok/cat?t=10"),
                      (503, f"{BASE}/ok/cat")):  # fmt: skip
        world.say(chat, url)  # three URLs, one video: vid:cat:18
    wait_for(lambda: world.settled(3), 30)
    assert len(world.calls("download", "cat")) == 1
    sends = world.log("sendVideo")
    assert sum("uploaded" in s for s in sends) == 1 and len(sends) == 3
    dq = durq.Durq(f"sqlite:///{world.data / 'durq.db'}", migrate=False)
    blobs = BlobStore(dq, world.data / "blobs")
    try:
        info = blobs.lookup("vid:cat:18")
        assert info is not None and info.external_id and info.external_id.startswith("file-")
        assert [s.get("video") for s in sends if "uploaded" not in s] == [info.external_id] * 2

        def gc() -> dict[str, Any]:
            done = subprocess.run(
                [sys.executable, "-m", "examples.media_bot", "--data-dir", str(world.data),
                 "gc", "--age", "0", "--grace", "0"],
                cwd=ROOT, env=world.env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return dict(json.loads(done.stdout.splitlines()[-1]))

        # Jobs gone, nothing but the file id holds it: the bytes stay (the write-up's rule).
        assert gc()["purged_jobs"] == 3
        info = blobs.lookup("vid:cat:18")
        assert info is not None and info.present and blobs.holders(info.key) == [FILE_HOLDER]
        # The chat forgets the file: sending by id fails, the bot falls back to the bytes.
        world.svc.files.discard(str(info.external_id))
        world.say(504, f"{BASE}/ok/cat")
        wait_for(lambda: world.settled(1) and len(world.log("sendVideo", 504)) == 2, 30)
        assert len(world.calls("download", "cat")) == 1  # still one download
        by_id, upload = world.log("sendVideo", 504)  # refused (wrong file identifier), bytes
        assert by_id["video"] == info.external_id and "uploaded" in upload
        # Unreferenced *and* the file id unknown: only now are the bytes released ...
        gc()
        bot = MediaBot(f"sqlite:///{world.data / 'durq.db'}", world.data, world.url)
        try:
            info = blobs.lookup("vid:cat:18")
            assert info is not None
            key = info.key
            assert bot.forget_file(key) is True
        finally:
            bot.dq.close()
        assert blobs.lookup("vid:cat:18") is None
        assert list((world.data / "blobs").glob(f"objects/*/{key}")) == []
        # ... and a GC'd blob (no bytes, no file id) is downloaded again.
        world.say(505, f"{BASE}/ok/cat")
        wait_for(lambda: world.settled(1) and len(world.log("sendVideo", 505)) == 1, 30)
        assert len(world.calls("download", "cat")) == 2
    finally:
        dq.close()


def test_periodic_update_renames_a_fresh_copy_while_downloads_run(world: World) -> None:
    """'yt-dlp self-update': copy the binary, --update the copy, rename it into place, so
    'running execs keep the old inode and new execs see old-or-new, never a partial'."""
    # Control: the fake's --update really rewrites its file in place, non-atomically, so a
    # run that starts meanwhile fails (half a script, or ETXTBSY: it is open for writing).
    victim = fake_ytdlp.install(world.data.parent / "control")
    updating = subprocess.Popen([str(victim), "--update"], stdout=subprocess.DEVNULL)
    broken = 0
    while updating.poll() is None:
        try:
            run = subprocess.run([str(victim), "--version"], capture_output=True, text=True)
            broken += run.returncode != 0 or not run.stdout.strip()
        except OSError:
            broken += 1
    assert broken > 0
    # The bot updates every second (single-flight) while downloads run: a first wave of 6
    # (3 at a time, so it spans several updates), then, once an update that began after the
    # whole first wave had started has finished, a second wave of 4 that must see a newer copy.
    bot = world.bot("--update-cron", "* * * * * *")
    for n in range(6):
        world.say(600 + n, f"{BASE}/ok/u{n}?sleep=0.8")
    wait_for(lambda: world.settled(6), 40)
    first_wave = max(c["start"] for c in world.calls("download"))

    def updated_since_first_wave() -> bool:
        return any(c["args"] == ["--update"] and c["start"] > first_wave
                   for c in world.calls("other"))  # fmt: skip

    wait_for(updated_since_first_wave, 20)
    for n in range(6, 10):
        world.say(600 + n, f"{BASE}/ok/u{n}?sleep=0.2")
    wait_for(lambda: world.settled(10), 40)
    wait_for(lambda: len(world.calls("other")) >= 6, 20)  # 3 updates: --update, --version
    jobs = world.jobs()
    assert all((j.state, j.attempts) == ("succeeded", 1) for j in jobs.values())
    assert all(not t.startswith("⚠️") for n in range(10) for m in world.status_texts(600 + n)
               for t in m)  # fmt: skip
    downloads = world.calls("download")
    assert len({c["version"] for c in downloads}) >= 2  # downloads ran under old and new
    updates = [c for c in world.calls("other") if c["args"] == ["--update"]]
    assert any(u["start"] < d["end"] and d["start"] < u["end"] for u in updates
               for d in world.calls())  # fmt: skip
    bot.send_signal(signal.SIGTERM)  # 'SIGTERM stops new jobs from starting; in-flight finish'
    assert bot.wait(30) == 0
    updates = [c for c in world.calls("other") if c["args"] == ["--update"]]
    installed = (world.bin / "yt-dlp").read_text()
    assert f"VERSION = {len(updates) + 1}" in installed
    assert not (world.bin / ".yt-dlp.updating").exists()
