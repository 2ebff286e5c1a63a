"""Rows the blob-store transitions of a :class:`durq.store.base.Store` return (durq.blobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: What ``Store.blob_put`` came to: recorded; ``absent`` (only_if_stored, and the content
#: is not stored: nothing written); ``no_job`` (the job to hold it does not exist).
PutResult = Literal["ok", "absent", "no_job"]

#: What ``Store.blob_ref`` came to: a new reference; ``held`` (that holder already held it);
#: ``no_blob`` (no record); ``no_job`` (the job does not exist). Nothing is written unless ``added``.
RefResult = Literal["added", "held", "no_blob", "no_job"]


@dataclass(frozen=True, slots=True)
class BlobRecord:
    """One ``blobs`` row. Times are seconds since the epoch on the store's clock.

    Attributes:
        key: the sha256 of the bytes, 64 lower-case hex digits.
        size: bytes.
        stored: True while the bytes are meant to be on disk; False once they were released
            and only the record is kept (for its external id).
        holds: how many references (named or job) hold it, dead job references included
            until gc or an unref sweeps them.
        external_id: an id the bytes are known by elsewhere (a CDN or chat-service file id).
        name: a descriptive file name given at put, or None.
        created_at: when it was first recorded.
        touched_at: the last put or ref.
    """

    key: str
    size: int
    stored: bool
    holds: int
    external_id: str | None
    name: str | None
    created_at: float
    touched_at: float


@dataclass(frozen=True, slots=True)
class BlobRelease:
    """What ``Store.blob_unref`` came to: ``removed`` (that reference existed and is gone),
    ``released`` (it was the last one and this caller won the right to delete the bytes;
    exactly one caller wins per release) and the released blob's ``size`` in bytes."""

    removed: bool
    released: bool
    size: int = 0


@dataclass(frozen=True, slots=True)
class BlobCollected:
    """What one ``Store.blob_collect`` transaction released.

    Attributes:
        released: (key, size) of each blob whose bytes this caller won the right to delete.
        dead_refs: job references removed because their job row no longer exists.
        dropped: records deleted that had neither bytes nor an external id left.
    """

    released: list[tuple[str, int]]
    dead_refs: int
    dropped: int
