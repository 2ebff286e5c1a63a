"""BlobStore: put, open, reference and name blobs (its garbage collection is
:mod:`durq.blobs.gc`)."""

from __future__ import annotations

import errno
import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from durq.blobs.gc import BlobCollector
from durq.blobs.records import (
    CHUNK,
    DEFAULT_GRACE,
    JOB_PREFIX,
    BlobInfo,
    Unref,
    _check_key,
    _check_text,
    _fsync_dir,
)
from durq.errors import BlobError, BlobGone, BlobNotFound, ConfigError, JobNotFound
from durq.failpoints import hit
from durq.model.blobs import BlobRecord

if TYPE_CHECKING:
    from durq.registry import Registry


class BlobStore(BlobCollector):
    """Content-addressed files under ``root``, with their records in ``dq``'s database.

    Args:
        dq: the :class:`durq.Durq` whose database holds the records (SQLite or PostgreSQL).
        root: a local directory (created if missing). With PostgreSQL every process must
            see the same directory (a shared volume); ``objects/`` and ``tmp/`` must be on
            one file system, which they are unless you mount one inside the other.
        grace: the default grace period of :meth:`gc`, in seconds (1 hour).

    Raises:
        ConfigError: ``grace`` is negative or not a number.
        OSError: ``root`` cannot be created.
    """

    def __init__(self, dq: Registry, root: str | os.PathLike[str], *, grace: float = DEFAULT_GRACE):
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            raise ConfigError(f"grace must be a number of seconds >= 0, not {grace!r}")
        self.dq = dq
        self.root = Path(root)
        self.grace = float(grace)
        self.objects = self.root / "objects"
        self.tmp = self.root / "tmp"
        for folder in (self.root, self.objects, self.tmp):
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                _fsync_dir(folder.parent)

    def __repr__(self) -> str:
        return f"<BlobStore {self.root} on {self.dq.url}>"

    # -- writing --------------------------------------------------------------------------

    def put(
        self,
        data: bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO,
        *,
        name: str | None = None,
        holder: str | None = None,
        job: int | None = None,
        alias: str | None = None,
    ) -> str:
        """Store bytes; returns their key (sha256, 64 hex digits).

        The bytes go to a temp file under ``root/tmp`` (hashed in :data:`CHUNK` pieces, so
        memory stays flat whatever the size), which is fsynced, linked into place under its
        key, the directory fsynced, and only then recorded in the database, together with
        the optional reference and alias, in one transaction. Content that is already stored
        is not written again: bytes and files are hashed first and only the record is
        touched; a stream is hashed while it is copied, and the copy dropped.

        Until a put returns, a crash leaves at most a temp file or an unrecorded file, both
        of which :meth:`gc` deletes once older than its grace period. A blob put without a
        holder is kept by :meth:`gc` for its grace period only; an :meth:`unref` of another
        holder of the same content may release it at once. Pass ``holder`` or ``job`` to
        hold it from the moment it is recorded.

        Args:
            data: the content: ``bytes``-like; a ``str`` or ``os.PathLike`` naming a file
                to copy (it is not moved); or a binary file object (anything with
                ``read(n) -> bytes``), read to its end and not closed.
            name: a descriptive file name kept on the record (e.g. ``"video.mp4"``).
            holder: a named holder to add (see :meth:`ref`).
            job: a job id to add as holder (see :meth:`ref`).
            alias: a logical name to point at the blob (see :meth:`alias`).

        Raises:
            ConfigError: a bad argument (a text stream, a bad holder, both or neither of
                ``holder`` and ``job`` when one is meant...); nothing written.
            JobNotFound: ``job`` does not exist; nothing recorded.
            FileNotFoundError, OSError: the source cannot be read, or ``root`` not written.
            StoreError: the database failed; the file it wrote is left for :meth:`gc`.
        """
        name = _check_text("name", name, optional=True)
        alias = _check_text("alias", alias, optional=True)
        who = self._holder(holder, job) if holder is not None or job is not None else None
        ref_holder, job_id = who if who else (None, None)
        args: dict[str, Any] = {
            "name": name,
            "holder": ref_holder,
            "job_id": job_id,
            "alias": alias,
        }
        if isinstance(data, bytes | bytearray | memoryview):
            view = memoryview(data).cast("B")
            key = hashlib.sha256(view).hexdigest()
            if self._touch(key, len(view), args):
                return key
            chunks: Iterator[bytes] = (
                bytes(view[i : i + CHUNK]) for i in range(0, len(view), CHUNK)
            )
            tmp, key, size = self._write_temp(chunks)
        elif isinstance(data, str | os.PathLike):
            source = Path(data)
            with source.open("rb") as f:
                key, size = self._hash(self._read_chunks(f))
            if self._touch(key, size, args):
                return key
            with source.open("rb") as f:
                tmp, key, size = self._write_temp(self._read_chunks(f))
        elif callable(getattr(data, "read", None)):
            tmp, key, size = self._write_temp(self._read_chunks(data))
            try:
                if self._touch(key, size, args):
                    tmp.unlink(missing_ok=True)
                    return key
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        else:
            raise ConfigError(
                f"put() takes bytes, a file path or a binary file object, not {type(data).__name__}"
            )
        try:
            self._place(tmp, key, size, args)
        finally:
            tmp.unlink(missing_ok=True)
        return key

    @staticmethod
    def _read_chunks(f: Any) -> Iterator[bytes]:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise ConfigError(
                    f"put() needs a binary stream; read() returned {type(chunk).__name__}"
                )
            yield bytes(chunk)

    @staticmethod
    def _hash(chunks: Iterator[bytes]) -> tuple[str, int]:
        h = hashlib.sha256()
        size = 0
        for chunk in chunks:
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size

    def _write_temp(self, chunks: Iterator[bytes]) -> tuple[Path, str, int]:
        """Copy ``chunks`` into a new fsynced temp file under ``tmp/``, hashing as it goes."""
        tmp = self.tmp / f"put-{uuid.uuid4().hex}.part"
        h = hashlib.sha256()
        size = 0
        try:
            with tmp.open("xb") as f:
                for chunk in chunks:
                    h.update(chunk)
                    f.write(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        hit("blob_written")
        return tmp, h.hexdigest(), size

    def _touch(self, key: str, size: int, args: dict[str, Any]) -> bool:
        """Content already stored: record the put (reference, alias) on it; True if so."""
        if not self._final(key).is_file():
            return False
        result = self.dq.store.blob_put(key, size, only_if_stored=True, **args)
        if result == "no_job":
            raise JobNotFound(f"job {args['job_id']} does not exist; nothing stored")
        # A release that won before our touch may still move the file away: check after.
        return result == "ok" and self._final(key).is_file()

    def _place(self, tmp: Path, key: str, size: int, args: dict[str, Any]) -> None:
        """Link ``tmp`` into place under ``key``, record it, and make sure it is still there.

        A release (an unref or gc that won in the database) moves the file aside, then asks
        the database whether the key is stored again and puts it back if so. We record
        first and look after, so one of us sees the other: if the file went before our
        record, we link it again from our temp file, which we keep until then.
        """
        final = self._final(key)
        folder = final.parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self.objects)
        linked = self._link(tmp, final)
        hit("blob_recorded")
        result = self.dq.store.blob_put(key, size, only_if_stored=False, **args)
        if result == "no_job":
            # The file stays unrecorded; gc deletes it after the grace period unless a
            # put records it first.
            raise JobNotFound(f"job {args['job_id']} does not exist; nothing recorded")
        if not linked:
            return  # the file system cannot link: renamed, nothing left to link again
        for _ in range(10):
            if final.is_file():
                return
            self._link(tmp, final)
        raise BlobError(f"{final} keeps disappearing while it is being stored")

    def _link(self, tmp: Path, final: Path) -> bool:
        """Hard-link ``tmp`` at ``final`` (an existing file there has the same bytes) and
        fsync the directory. False when the file system has no hard links: then ``tmp``
        is renamed into place instead."""
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            os.replace(tmp, final)
            _fsync_dir(final.parent)
            return False
        _fsync_dir(final.parent)
        return True

    # -- reading --------------------------------------------------------------------------

    def _final(self, key: str) -> Path:
        return self.objects / key[:2] / key

    def _record(self, key: str) -> BlobRecord:
        record = self.dq.store.blob_get(_check_key(key))
        if record is None:
            raise BlobNotFound(f"no blob {key}")
        return record

    def _info(self, r: BlobRecord) -> BlobInfo:
        path = self._final(r.key)
        return BlobInfo(
            r.key, r.size, r.stored, r.stored and path.is_file(), r.holds, r.external_id,
            r.name, r.created_at, r.touched_at, path,
        )  # fmt: skip

    def path(self, key: str) -> Path:
        """Where blob ``key``'s bytes are. The file may go once nothing holds the blob
        (hold a reference, or open it: an open file keeps reading after a delete).

        Raises:
            ConfigError: not a key.
            BlobNotFound: no record.
            BlobGone: the record has no bytes (released; or the file is missing).
        """
        record = self._record(key)
        path = self._final(key)
        if not record.stored:
            raise BlobGone(f"blob {key} was released; only its record remains")
        if not path.is_file():
            raise BlobGone(f"blob {key} is recorded but {path} is missing")
        return path

    def open(self, key: str) -> BinaryIO:
        """Open blob ``key`` for reading (binary). The caller closes it.

        Raises:
            ConfigError: not a key.
            BlobNotFound: no record.
            BlobGone: the record has no bytes (released; or the file is missing).
        """
        for attempt in range(3):
            path = self.path(key)
            try:
                return path.open("rb")
            except FileNotFoundError:
                # A release was moving it aside and found it recorded again: it comes back.
                if attempt == 2:
                    raise BlobGone(f"blob {key} is recorded but {path} is missing") from None
                time.sleep(0.05)
        raise AssertionError("unreachable")

    def exists(self, key: str) -> bool:
        """True when blob ``key`` is recorded as stored and its file is on disk.

        Raises:
            ConfigError: not a key.
        """
        record = self.dq.store.blob_get(_check_key(key))
        return record is not None and record.stored and self._final(key).is_file()

    def info(self, key: str) -> BlobInfo:
        """The record of blob ``key``.

        Raises:
            ConfigError: not a key.
            BlobNotFound: no record.
        """
        return self._info(self._record(key))

    def holders(self, key: str) -> list[str]:
        """The holders of blob ``key``: names, and ``"job:<id>"`` for jobs, oldest first.

        Raises:
            ConfigError: not a key.
        """
        return [h for h, _, _ in self.dq.store.blob_holders(_check_key(key))]

    def ls(self, *, after: str = "", limit: int = 100) -> list[BlobInfo]:
        """Up to ``limit`` records with key greater than ``after``, by key (paging)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"limit must be an int >= 1, not {limit!r}")
        return [self._info(r) for r in self.dq.store.blob_list(after, limit)]

    # -- references -----------------------------------------------------------------------

    @staticmethod
    def _holder(holder: str | None, job: int | None) -> tuple[str, int | None]:
        if (holder is None) == (job is None):
            raise ConfigError("give a holder name or job=<id>, exactly one of them")
        if job is not None:
            if isinstance(job, bool) or not isinstance(job, int) or job < 1:
                raise ConfigError(f"job must be a job id (int >= 1), not {job!r}")
            return f"{JOB_PREFIX}{job}", job
        name = _check_text("holder", holder)
        assert name is not None
        if name.startswith(JOB_PREFIX):
            raise ConfigError(f"holder names starting {JOB_PREFIX!r} are jobs': use job=<id>")
        return name, None

    def ref(self, key: str, holder: str | None = None, *, job: int | None = None) -> bool:
        """Hold blob ``key`` for ``holder`` (a name such as ``"chat:123"``) or for a job.

        A held blob's bytes are never deleted. A named reference lasts until
        :meth:`unref`; a job's lasts until :meth:`unref` or until the job's row no longer
        exists (``dq.purge`` or retention deleted it): :meth:`gc` sweeps those, so the
        pruner needs to know nothing about blobs. Referencing a released blob (a record
        kept for its external id) is allowed; it does not bring the bytes back.

        Returns:
            True for a new reference, False when that holder already held it.

        Raises:
            ConfigError: not a key; neither or both of ``holder`` and ``job``; a holder
                name starting ``"job:"``.
            BlobNotFound: no record for ``key``.
            JobNotFound: ``job`` does not exist.
        """
        name, job_id = self._holder(holder, job)
        result = self.dq.store.blob_ref(_check_key(key), name, job_id)
        if result == "no_blob":
            raise BlobNotFound(f"no blob {key}")
        if result == "no_job":
            raise JobNotFound(f"job {job_id} does not exist")
        return result == "added"

    def unref(
        self, key: str, holder: str | None = None, *, job: int | None = None, release: bool = True
    ) -> Unref:
        """Drop ``holder``'s (or the job's) reference to blob ``key``.

        With ``release`` (the default), dropping the last live reference releases the blob
        in the same transaction: its bytes are deleted at once, and its record too unless
        it has an external id. The release is a conditional change of the blob's row, so
        of two processes dropping the last references at once exactly one wins and
        deletes the file. With ``release=False`` the bytes wait for :meth:`gc`.

        Returns:
            :class:`Unref`; false when that reference did not exist (nothing changed).

        Raises:
            ConfigError: not a key; neither or both of ``holder`` and ``job``.
        """
        name, _ = self._holder(holder, job)
        outcome = self.dq.store.blob_unref(_check_key(key), name, release)
        if outcome.released:
            hit("blob_released")
            self._delete_bytes(key, outcome.size)
        return Unref(outcome.removed, outcome.released)

    # -- aliases and external ids ---------------------------------------------------------

    def alias(self, name: str, key: str) -> None:
        """Point the logical name ``name`` (e.g. ``"youtube:<id>:<format>"``) at blob ``key``,
        replacing what it pointed at. An alias is not a reference: it goes with the
        blob's record (and lives on with a released blob that keeps an external id).

        Raises:
            ConfigError: a bad name or key.
            BlobNotFound: no record for ``key``.
        """
        checked = _check_text("alias", name)
        assert checked is not None
        if not self.dq.store.blob_alias(checked, _check_key(key)):
            raise BlobNotFound(f"no blob {key}")

    def unalias(self, name: str) -> bool:
        """Remove an alias; False when there was none."""
        checked = _check_text("alias", name)
        assert checked is not None
        return self.dq.store.blob_unalias(checked)

    def lookup(self, name: str) -> BlobInfo | None:
        """The blob an alias names, or None ("we do not have it").

        "We have it" is ``info.present`` (the bytes are here) or ``info.external_id`` (it
        can be sent by id); a blob with neither has been garbage-collected and must be
        fetched again.

        Raises:
            ConfigError: a bad name.
        """
        checked = _check_text("alias", name)
        assert checked is not None
        record = self.dq.store.blob_lookup(checked)
        return self._info(record) if record else None

    def set_external_id(self, key: str, external_id: str | None) -> None:
        """Record the id blob ``key`` is known by elsewhere (a CDN or chat-service file id),
        or clear it with None.

        A blob with an external id keeps its record (and aliases) after its bytes are
        released; clearing it lets :meth:`gc` drop a record that has no bytes and no holder.

        Raises:
            ConfigError: a bad key or id.
            BlobNotFound: no record for ``key``.
        """
        checked = _check_text("external_id", external_id, optional=True)
        if not self.dq.store.blob_set_external(_check_key(key), checked):
            raise BlobNotFound(f"no blob {key}")

    # -- garbage collection ---------------------------------------------------------------
