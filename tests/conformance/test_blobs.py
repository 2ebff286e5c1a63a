"""The blob store (issue 4, item 9) on every backend: content addressing, references, the
external id that outlives the bytes, gc, races between releases and puts, crashes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

import durq
from durq.blobs import BlobStore, Unref
from tests.conftest import Clock

DATA = b"the same video, requested twice\n" * 1000


def read(blobs: BlobStore, key: str) -> bytes:
    with blobs.open(key) as f:
        return f.read()


def at_once(*calls: Callable[[], object]) -> list[object]:
    """Run the calls on threads released together; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    out: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def files_under(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*") if p.is_file())


def test_put_open_round_trip_and_dedupe(app: durq.Durq, tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    blobs = BlobStore(app, root)
    key = blobs.put(DATA, name="video.mp4")
    assert key == hashlib.sha256(DATA).hexdigest()
    with blobs.open(key) as f:
        assert f.read() == DATA
    assert blobs.path(key).read_bytes() == DATA
    assert blobs.exists(key)
    info = blobs.info(key)
    assert (info.size, info.stored, info.present, info.name) == (len(DATA), True, True, "video.mp4")

    # the same content again, as bytes, a file and a stream: the same key, one file
    source = tmp_path / "download.part"
    source.write_bytes(DATA)
    assert blobs.put(source) == key
    assert blobs.put(str(source)) == key
    assert blobs.put(io.BytesIO(DATA)) == key
    assert blobs.put(bytearray(DATA)) == key
    assert files_under(root, "objects") == [blobs.path(key)]
    assert files_under(root, "tmp") == []  # the stream's copy was dropped
    assert blobs.info(key).name == "video.mp4"

    empty = blobs.put(b"")
    assert read(blobs, empty) == b""
    assert [b.key for b in blobs.ls()] == sorted([key, empty])

    missing = "0" * 64
    assert not blobs.exists(missing)
    with pytest.raises(durq.BlobNotFound):
        blobs.open(missing)
    with pytest.raises(durq.BlobNotFound):
        blobs.info(missing)
    with pytest.raises(durq.ConfigError):
        blobs.open("../../etc/passwd")
    with pytest.raises(durq.ConfigError):
        blobs.put(io.StringIO("text"))  # a text stream
    with pytest.raises(durq.ConfigError):
        blobs.put(12345)  # type: ignore[arg-type]
    assert files_under(root, "tmp") == []


def test_ref_unref_gc(app: durq.Durq, tmp_path: Path, clock: Clock) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    key = blobs.put(DATA, holder="chat:1", alias="youtube:abc:22")
    assert blobs.ref(key, "chat:2") is True
    assert blobs.ref(key, "chat:2") is False  # already held: nothing changes
    assert blobs.holders(key) == ["chat:1", "chat:2"]
    assert blobs.info(key).holds == 2

    assert blobs.gc(grace=0).released == 0  # held
    first = blobs.unref(key, "chat:1")
    assert first == Unref(removed=True, released=False) and first
    assert blobs.exists(key)
    assert not blobs.unref(key, "chat:1")  # gone already: False, nothing changed

    last = blobs.unref(key, "chat:2")
    assert last == Unref(removed=True, released=True)
    assert not blobs.exists(key)
    with pytest.raises(durq.BlobNotFound):
        blobs.info(key)  # no external id: the record went with the bytes
    assert blobs.lookup("youtube:abc:22") is None  # and its alias
    assert files_under(blobs.root, "objects") == []

    # release=False leaves the bytes to gc, which waits out its grace period
    key = blobs.put(DATA, holder="chat:3")
    assert blobs.unref(key, "chat:3", release=False) == Unref(True, False)
    assert blobs.exists(key)
    assert blobs.gc(grace=60).released == 0
    clock.advance(61)
    summary = blobs.gc(grace=60)
    assert (summary.released, summary.deleted, summary.freed) == (1, 1, len(DATA))
    assert not blobs.exists(key)

    # a put without a holder is spared for the grace period only
    key = blobs.put(DATA)
    assert blobs.gc(grace=60).released == 0
    clock.advance(61)
    assert blobs.gc(grace=60).released == 1

    with pytest.raises(durq.BlobNotFound):
        blobs.ref(key, "chat:4")
    with pytest.raises(durq.ConfigError):
        blobs.ref(key, "job:1")  # job holders go by job=
    with pytest.raises(durq.ConfigError):
        blobs.ref(key)
    key = blobs.put(DATA)
    with pytest.raises(durq.JobNotFound):
        blobs.ref(key, job=999_999)
    with pytest.raises(durq.JobNotFound):
        blobs.put(b"other", job=999_999)
    assert blobs.holders(key) == []


def test_alias_names_a_blob(app: durq.Durq, tmp_path: Path) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    assert blobs.lookup("youtube:abc:22") is None
    one = blobs.put(b"one", holder="h")
    two = blobs.put(b"two", holder="h")
    blobs.alias("youtube:abc:22", one)
    found = blobs.lookup("youtube:abc:22")
    assert found is not None and found.key == one
    blobs.alias("youtube:abc:22", two)  # replaces
    found = blobs.lookup("youtube:abc:22")
    assert found is not None and found.key == two
    assert blobs.unalias("youtube:abc:22") is True
    assert blobs.unalias("youtube:abc:22") is False
    with pytest.raises(durq.BlobNotFound):
        blobs.alias("x", "f" * 64)


def test_external_id_survives_gc(app: durq.Durq, tmp_path: Path) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    key = blobs.put(DATA, alias="youtube:abc:22", job=None, holder="pending:7")
    blobs.set_external_id(key, "BAACAgIAAxkBAAIC")
    blobs.unref(key, "pending:7", release=False)
    summary = blobs.gc(grace=0)
    assert (summary.released, summary.deleted) == (1, 1)
    assert files_under(blobs.root, "objects") == []

    # the record stays, with its id: the app can send the file by id
    found = blobs.lookup("youtube:abc:22")
    assert found is not None
    assert (found.key, found.stored, found.present) == (key, False, False)
    assert found.external_id == "BAACAgIAAxkBAAIC"
    with pytest.raises(durq.BlobGone):
        blobs.open(key)
    with pytest.raises(durq.BlobGone):
        blobs.path(key)
    assert blobs.gc(grace=0).dropped == 0  # still there: it has an id

    # the bytes come back when the content is put again
    assert blobs.put(io.BytesIO(DATA)) == key
    assert read(blobs, key) == DATA
    assert blobs.info(key).external_id == "BAACAgIAAxkBAAIC"

    # once the id is cleared and the bytes released, nothing keeps the record
    blobs.set_external_id(key, None)
    summary = blobs.gc(grace=0)
    assert summary.released == 1
    with pytest.raises(durq.BlobNotFound):
        blobs.info(key)
    with pytest.raises(durq.BlobNotFound):
        blobs.set_external_id(key, "x")


def test_external_id_record_dropped_once_cleared(app: durq.Durq, tmp_path: Path) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    key = blobs.put(DATA)
    blobs.set_external_id(key, "cdn:1")
    assert blobs.gc(grace=0).released == 1
    blobs.set_external_id(key, None)
    assert blobs.gc(grace=0).dropped == 1
    assert blobs.lookup("anything") is None
    with pytest.raises(durq.BlobNotFound):
        blobs.info(key)


def test_job_references_die_with_the_job_row(app: durq.Durq, tmp_path: Path) -> None:
    blobs = BlobStore(app, tmp_path / "blobs")
    job = app.enqueue("download", {"url": "https://example.org/v"}, queue="media")
    other = app.enqueue("download", {"url": "https://example.org/w"}, queue="keep")
    key = blobs.put(DATA, job=job.id)
    assert blobs.ref(key, job=other.id) is True
    assert blobs.holders(key) == [f"job:{job.id}", f"job:{other.id}"]
    assert blobs.gc(grace=0).released == 0

    app.cancel(job.id)
    assert app.purge("media") == 1  # retention deletes the job row; it knows nothing of blobs
    summary = blobs.gc(grace=0)
    assert (summary.dead_refs, summary.released) == (1, 0)
    assert blobs.holders(key) == [f"job:{other.id}"]

    app.cancel(other.id)
    app.purge("keep")
    summary = blobs.gc(grace=0)
    assert (summary.dead_refs, summary.released, summary.deleted) == (1, 1, 1)
    assert not blobs.exists(key)

    # an unref of a live holder also sweeps the dead job references of that blob
    third = app.enqueue("download", {"url": "u"}, queue="media")
    key = blobs.put(DATA, job=third.id)
    blobs.ref(key, "chat:1")
    app.cancel(third.id)
    app.purge("media")
    assert blobs.unref(key, "chat:1") == Unref(True, True)
    assert not blobs.exists(key)


def test_two_unrefs_of_the_last_references_release_once(
    make: Callable[[], durq.Durq], tmp_path: Path
) -> None:
    root = tmp_path / "blobs"
    stores = [BlobStore(make(), root), BlobStore(make(), root)]
    rounds = 25
    keys = [stores[0].put(b"blob %d" % i, holder="a") for i in range(rounds)]
    for key in keys:
        stores[1].ref(key, "b")
        stores[1].ref(key, "c")
        stores[0].unref(key, "c")  # one more holder that has come and gone

    def race(holders: tuple[str, str]) -> list[list[Unref]]:
        results: list[list[Unref]] = []
        for key in keys:
            out = at_once(
                lambda key=key: stores[0].unref(key, holders[0]),
                lambda key=key: stores[1].unref(key, holders[1]),
            )
            assert all(isinstance(o, Unref) for o in out), out
            results.append(out)  # type: ignore[arg-type]
        return results

    # two holders, each dropped by its own process at the same instant
    for first, second in race(("a", "b")):
        assert first.removed and second.removed
        assert [first.released, second.released].count(True) == 1
    assert all(not stores[0].exists(k) for k in keys)
    assert files_under(root, "objects") == [] and files_under(root, "tmp") == []

    # the same last holder dropped twice at once: one removes it, one is told it was gone
    keys = [stores[0].put(b"again %d" % i, holder="a") for i in range(rounds)]
    for first, second in race(("a", "a")):
        assert [first.removed, second.removed].count(True) == 1
        assert [first.released, second.released].count(True) == 1
    assert files_under(root, "objects") == []


def test_put_racing_a_release_of_the_same_content_keeps_its_bytes(
    make: Callable[[], durq.Durq], tmp_path: Path
) -> None:
    """A release moves the file aside and deletes it unless the key is stored again; a put
    records and then checks its file: whoever looks last sees the other."""
    root = tmp_path / "blobs"
    stores = [BlobStore(make(), root), BlobStore(make(), root)]
    for i in range(30):
        data = b"contended %d" % i
        key = stores[0].put(data, holder="old")
        out = at_once(
            lambda key=key: stores[0].unref(key, "old"),
            lambda data=data: stores[1].put(io.BytesIO(data), holder="new"),
        )
        assert not [o for o in out if isinstance(o, BaseException)], out
        assert stores[0].exists(key), f"round {i}: a held blob lost its bytes"
        assert read(stores[0], key) == data
        assert stores[0].holders(key) == ["new"]
        stores[1].unref(key, "new")


CHILD = """
import os, sys
import durq
from durq.blobs import BlobStore
dq = durq.Durq(sys.argv[1])
blobs = BlobStore(dq, sys.argv[2])
if sys.argv[3] == "put":
    blobs.put(b"crash between write and record")
else:
    key = blobs.put(b"crash between release and unlink", holder="h")
    print(key, flush=True)
    blobs.unref(key, "h")
print("survived", flush=True)
"""


def crash_child(url: str, root: Path, action: str, failpoint: str) -> str:
    env = dict(os.environ, DURQ_FAILPOINTS=f"{failpoint}=exit")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), url, str(root), action],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 137, proc.stderr
    assert "survived" not in proc.stdout
    return proc.stdout.strip()


def test_crash_between_write_and_record_leaves_files_gc_finds(
    app: durq.Durq, backend_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "blobs"
    blobs = BlobStore(app, root)
    key = hashlib.sha256(b"crash between write and record").hexdigest()

    crash_child(backend_url, root, "put", "blob_recorded")  # in place, not recorded
    assert (root / "objects" / key[:2] / key).is_file()
    assert len(files_under(root, "tmp")) == 1  # its temp file, kept until recorded
    with pytest.raises(durq.BlobNotFound):
        blobs.info(key)
    assert not blobs.exists(key)

    young = blobs.gc()  # default grace, an hour: a put in flight looks the same
    assert (young.orphans, young.temps) == (0, 0)
    assert (root / "objects" / key[:2] / key).is_file()

    summary = blobs.gc(grace=0)
    assert (summary.orphans, summary.temps) == (1, 1)
    assert files_under(root, "objects") == [] and files_under(root, "tmp") == []

    crash_child(backend_url, root, "put", "blob_written")  # a temp file, not yet in place
    assert files_under(root, "objects") == [] and len(files_under(root, "tmp")) == 1
    assert blobs.gc(grace=0).temps == 1
    assert files_under(root, "tmp") == []

    # the orphan's content put again later is stored normally
    assert blobs.put(b"crash between write and record") == key
    assert blobs.exists(key)


def test_crash_between_release_and_unlink_leaves_a_file_gc_finds(
    app: durq.Durq, backend_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "blobs"
    blobs = BlobStore(app, root)
    key = crash_child(backend_url, root, "unref", "blob_released")
    with pytest.raises(durq.BlobNotFound):
        blobs.info(key)  # the release committed
    assert (root / "objects" / key[:2] / key).is_file()  # the unlink never happened
    summary = blobs.gc(grace=0)
    assert summary.orphans == 1
    assert files_under(root, "objects") == []


def test_a_crashed_release_that_moved_bytes_aside_is_undone(app: durq.Durq, tmp_path: Path) -> None:
    """A file moved aside by a release that died before deciding goes back when the key is
    stored (a put recorded it meanwhile), and is deleted otherwise."""
    root = tmp_path / "blobs"
    blobs = BlobStore(app, root)
    kept = blobs.put(b"kept", holder="h")
    gone = blobs.put(b"gone", holder="h")
    blobs.unref(gone, "h", release=True)
    gone_bytes = root / "tmp" / f"gc-{gone}-0123abcd"
    gone_bytes.write_bytes(b"gone")
    os.rename(blobs.path(kept), root / "tmp" / f"gc-{kept}-0123abcd")
    assert not blobs.exists(kept)
    summary = blobs.gc(grace=0)
    assert (summary.restored, summary.orphans) == (1, 1)
    assert read(blobs, kept) == b"kept"
    assert files_under(root, "tmp") == []


class Zeros:
    """A 50 MB binary stream that never holds more than one read in memory."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = bytes(range(256)) * 4096  # 1 MiB

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        n = min(n, len(self.block))
        self.left -= n
        return self.block[:n]


def test_put_of_a_50_mb_stream_keeps_memory_flat(app: durq.Durq, tmp_path: Path) -> None:
    size = 50 * 1024 * 1024
    blobs = BlobStore(app, tmp_path / "blobs")
    expected = hashlib.sha256()
    stream = Zeros(size)
    for _ in range(size // len(stream.block)):
        expected.update(stream.block)
    app.store  # open the database before measuring  # noqa: B018

    tracemalloc.start()
    try:
        key = blobs.put(Zeros(size))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert key == expected.hexdigest()
    assert blobs.info(key).size == size
    assert os.path.getsize(blobs.path(key)) == size
    # a few 1 MiB chunks at most, never the 50 MB
    assert peak < 8 * 1024 * 1024, f"put held {peak / 2**20:.1f} MiB at its peak"


def test_ref_and_unref_racing_keep_holds_exact(
    make: Callable[[], durq.Durq], tmp_path: Path
) -> None:
    """ref, unref and gc at once on the same blob: no error (no deadlock), and the
    holds counter always equals the references that exist."""
    root = tmp_path / "blobs"
    stores = [BlobStore(make(), root) for _ in range(3)]
    key = stores[0].put(DATA, holder="anchor")
    for i in range(30):
        holder = f"h{i % 3}"
        out = at_once(
            lambda holder=holder: stores[0].ref(key, holder),
            lambda holder=holder: stores[1].unref(key, holder),
            lambda: stores[2].gc(grace=0),
        )
        assert not [o for o in out if isinstance(o, BaseException)], out
        info = stores[0].info(key)
        assert info.holds == len(stores[0].holders(key))
        assert info.present
