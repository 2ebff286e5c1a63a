"""The blob store with real worker processes (the media-bot seed) and its CLI verbs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import durq
from durq.blobs import BlobStore
from tests.support.procs import ROOT, WorkerProc, wait_for


def states(dq: durq.Durq, ids: list[int]) -> list[str]:
    return [dq.get(i).state for i in ids]


def test_same_video_twice_is_downloaded_once_and_a_killed_job_reuses_its_bytes(
    url: str, tmp_path: Path
) -> None:
    root, runs = tmp_path / "blobs", tmp_path / "runs.txt"
    runs.touch()
    env = {"BLOB_ROOT": str(root), "RUNS_FILE": str(runs), "CRASH_AFTER_PUT": "v2"}
    dq = durq.Durq(url)
    blobs = BlobStore(dq, root)
    try:
        first = dq.enqueue("download", {"video": "v1", "chat": 1}, queue="media")
        proc = WorkerProc("tests.apps.media:dq", url, tmp_path / "w1.log", ["--lease", "2"], env)
        try:
            wait_for(lambda: states(dq, [first.id]) == ["succeeded"], 30, what="v1 sent")
            again = dq.enqueue("download", {"video": "v1", "chat": 2}, queue="media")
            wait_for(lambda: states(dq, [again.id]) == ["succeeded"], 30, what="v1 again")
            assert dq.get(again.id).result == {"sent": "chatfile-v1", "via": "file_id"}

            # v2: the worker dies after the bytes arrived, before the send
            crash = dq.enqueue("download", {"video": "v2", "chat": 3}, queue="media")
            wait_for(lambda: proc.proc.poll() is not None, 30, what="the worker to die")
        finally:
            proc.stop()
        found = blobs.lookup("fake:v2:22")
        assert found is not None and found.present and found.external_id is None
        assert blobs.holders(found.key) == [f"job:{crash.id}"]

        env.pop("CRASH_AFTER_PUT")
        proc = WorkerProc("tests.apps.media:dq", url, tmp_path / "w2.log", ["--lease", "2"], env)
        try:
            wait_for(lambda: states(dq, [crash.id]) == ["succeeded"], 30, what="v2 recovered")
            proc.signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            proc.stop()
        assert dq.get(crash.id).result == {"sent": "chatfile-v2", "via": "upload"}
        assert runs.read_text().splitlines() == ["download v1", "download v2"]

        # retention prunes the jobs; gc then frees the bytes and keeps the file ids
        assert blobs.gc(grace=0).released == 0  # the v2 job's row still holds its blob
        dq.purge("media")
        summary = blobs.gc(grace=0)
        assert (summary.dead_refs, summary.released, summary.deleted) == (2, 2, 2)
        for video in ("v1", "v2"):
            found = blobs.lookup(f"fake:{video}:22")
            assert found is not None and not found.present
            assert found.external_id == f"chatfile-{video}"
    finally:
        dq.close()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=60,
    )


def test_cli_blobs_ls_and_gc(tmp_path: Path) -> None:
    db, root = str(tmp_path / "jobs.db"), tmp_path / "blobs"
    dq = durq.Durq(db)
    blobs = BlobStore(dq, root)
    held = blobs.put(b"held", holder="chat:1", name="a.mp4")
    loose = blobs.put(b"loose")
    blobs.set_external_id(loose, "cdn:9")
    dq.close()

    out = run("blobs", "ls", "--db", db, "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["key"]: r for r in json.loads(out.stdout)}
    assert rows[held]["holds"] == 1 and rows[held]["name"] == "a.mp4"
    assert rows[loose]["external_id"] == "cdn:9" and rows[loose]["present"]
    out = run("blobs", "ls", "--db", db, "--root", str(root))
    assert out.returncode == 0 and held[:16] in out.stdout

    out = run("blobs", "gc", "--db", db, "--root", str(root), "--grace", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["released"] == 1
    rows = {
        r["key"]: r
        for r in json.loads(run("blobs", "ls", "--db", db, "--root", str(root), "--json").stdout)
    }
    assert rows[loose]["stored"] is False and rows[held]["present"]

    out = run("blobs", "gc", "--db", db, "--root", str(tmp_path / "missing"))
    assert out.returncode == 1 and "no blob store" in out.stderr
