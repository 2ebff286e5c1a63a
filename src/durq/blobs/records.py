"""The blob store's constants, the records it returns (BlobInfo, Unref, GcSummary) and
the checks and file helpers its parts share."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durq.checks import check_storable
from durq.errors import ConfigError

#: Bytes read and written per step: a put holds about this much in memory at once.
CHUNK = 1 << 20
#: gc's default grace period, in seconds (see :meth:`BlobStore.gc`).
DEFAULT_GRACE = 3600.0
KEY_PATTERN = re.compile(r"[0-9a-f]{64}")
_TRASH = re.compile(r"gc-([0-9a-f]{64})-[0-9a-f]+")
JOB_PREFIX = "job:"
NAME_LIMIT = 500

BLOB_DELETED = "blob_deleted"
BLOB_RESTORED = "blob_restored"


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What the store knows about one blob.

    Attributes:
        key: sha256 of the bytes (64 lower-case hex digits).
        size: bytes.
        stored: the record says the bytes are kept (False: released; only the record and
            its external id remain).
        present: the file is on disk right now (``stored`` and ``present`` differ only
            after a crash or a hand-made change, which :meth:`BlobStore.gc` repairs or
            reports).
        holds: references holding it (job references whose job is gone count until swept).
        external_id: the id the bytes are known by elsewhere, or None.
        name: the descriptive file name given at put, or None.
        created_at: first recorded, seconds since the epoch (the store's clock).
        touched_at: the last put or ref, seconds since the epoch (the store's clock).
        path: where the bytes are (or were) on disk.
    """

    key: str
    size: int
    stored: bool
    present: bool
    holds: int
    external_id: str | None
    name: str | None
    created_at: float
    touched_at: float
    path: Path


@dataclass(frozen=True, slots=True)
class Unref:
    """What :meth:`BlobStore.unref` did. True (as a bool) when the reference existed.

    Attributes:
        removed: the reference existed and is gone now.
        released: it was the last one and this call released the blob: the bytes were
            deleted (and the record too, unless it has an external id). Of two callers
            dropping the last references at once exactly one sees True.
    """

    removed: bool
    released: bool

    def __bool__(self) -> bool:
        return self.removed


@dataclass(slots=True)
class GcSummary:
    """What one :meth:`BlobStore.gc` pass did.

    Attributes:
        released: blobs released in the database by this pass (nothing held them and
            nothing touched them within the grace period).
        deleted: files deleted for those releases.
        freed: bytes of those files.
        dead_refs: job references removed because their job row no longer exists.
        dropped: records removed that had neither bytes nor an external id left.
        orphans: files under ``objects/`` with no stored record, older than the grace
            period, deleted (a crash between writing and recording, or between a
            release and its unlink).
        temps: temp files of puts older than the grace period, deleted (a crashed put).
        restored: files a crashed release had moved aside while a put recorded them again,
            put back.
    """

    released: int = 0
    deleted: int = 0
    freed: int = 0
    dead_refs: int = 0
    dropped: int = 0
    orphans: int = 0
    temps: int = 0
    restored: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a link) durable; a no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_text(what: str, value: object, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > NAME_LIMIT:
        raise ConfigError(
            f"{what} must be a non-empty str of at most {NAME_LIMIT} characters, not {value!r}"
        )
    return check_storable(what, value)


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise ConfigError(f"a blob key is 64 lower-case hex digits (sha256), not {key!r}")
    return key
