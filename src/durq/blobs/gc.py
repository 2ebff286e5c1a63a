"""BlobCollector: the garbage collection of :class:`durq.blobs.BlobStore` (deleting
unheld bytes after a grace period, sweeping crash leftovers)."""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from durq.blobs.records import (
    _TRASH,
    BLOB_DELETED,
    BLOB_RESTORED,
    KEY_PATTERN,
    GcSummary,
    _fsync_dir,
)
from durq.errors import ConfigError
from durq.failpoints import hit
from durq.observability import events

if TYPE_CHECKING:
    from durq.registry import Registry


class BlobCollector:
    """The ``gc`` half of :class:`durq.blobs.BlobStore` (a mixin: the store defines the
    attributes declared here for the type checker)."""

    if TYPE_CHECKING:
        dq: Registry
        root: Path
        grace: float
        objects: Path
        tmp: Path

        def _final(self, key: str) -> Path: ...

    def gc(self, grace: float | None = None, *, limit: int = 1000) -> GcSummary:
        """Release what nothing holds and delete files nothing records.

        1. In the database (transactions of up to ``limit`` blobs): sweep job references
           whose job row is gone; release every stored blob with no reference that no put
           or ref touched for ``grace`` seconds (a conditional change per row: of two
           collectors, or a collector and an unref, exactly one wins each blob); drop
           records left with neither bytes nor external id. The winner deletes the files.
        2. On disk: put back or delete what a crashed release moved aside; delete temp
           files and files under ``objects/`` with no stored record whose modification
           (for moved-aside files: change) time is more than ``grace`` seconds ago on this
           machine's clock (crashes between writing and recording, or between a release
           and its delete).

        The grace period protects puts in flight: a put writing a temp file keeps its
        modification time fresh, and one between linking its file and recording it is
        younger than ``grace`` unless it stalled for that long. Should a collector delete
        such a file anyway, the put sees it gone after recording and links it again.
        ``grace`` must exceed the longest pause of a stream given to :meth:`put`.

        Args:
            grace: seconds (default: the store's ``grace``, 1 hour).
            limit: blobs released per database transaction.

        Raises:
            ConfigError: a bad ``grace`` or ``limit``.
            StoreError: the database failed (what was already done stays done).
        """
        grace = self.grace if grace is None else grace
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            raise ConfigError(f"grace must be a number of seconds >= 0, not {grace!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"limit must be an int >= 1, not {limit!r}")
        summary = GcSummary()
        while True:
            collected = self.dq.store.blob_collect(float(grace), limit)
            summary.dead_refs += collected.dead_refs
            summary.dropped += collected.dropped
            for key, size in collected.released:
                summary.released += 1
                hit("blob_released")
                if self._delete_bytes(key, size):
                    summary.deleted += 1
                    summary.freed += size
            if not collected.released and not collected.dead_refs:
                break
        cutoff = time.time() - grace
        self._sweep_tmp(cutoff, summary)
        self._sweep_objects(cutoff, summary)
        return summary

    def _delete_bytes(self, key: str, size: int) -> bool:
        """Delete a released blob's file; True if this call deleted it.

        The file is first moved aside (atomically), then the database is asked whether a
        put recorded the key again meanwhile; if so it goes back, else it is deleted. A put
        checks for its file after recording, so whichever of the two looks last sees the
        other.
        """
        final = self._final(key)
        aside = self.tmp / f"gc-{key}-{uuid.uuid4().hex}"
        try:
            os.rename(final, aside)
        except FileNotFoundError:
            return False
        if self.dq.store.blob_stored([key]):
            self._restore(aside, key)
            return False
        aside.unlink(missing_ok=True)
        events.emit(BLOB_DELETED, key=key, size=size, root=str(self.root))
        return True

    def _restore(self, aside: Path, key: str) -> None:
        final = self._final(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(aside, final)  # same bytes as anything a put linked there meanwhile
        except FileNotFoundError:
            return
        _fsync_dir(final.parent)
        events.emit(BLOB_RESTORED, logging.WARNING, key=key, root=str(self.root))

    def _sweep_tmp(self, cutoff: float, summary: GcSummary) -> None:
        try:
            entries = list(os.scandir(self.tmp))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            moved = _TRASH.fullmatch(entry.name)
            if moved:
                # A release moved it aside and crashed (or is still deciding): the change
                # time is when it was moved.
                if st.st_ctime > cutoff:
                    continue
                key = moved.group(1)
                if self.dq.store.blob_stored([key]):
                    self._restore(Path(entry.path), key)
                    summary.restored += 1
                else:
                    Path(entry.path).unlink(missing_ok=True)
                    summary.orphans += 1
            elif (
                entry.name.startswith("put-")
                and entry.name.endswith(".part")
                and st.st_mtime <= cutoff
            ):
                Path(entry.path).unlink(missing_ok=True)
                summary.temps += 1

    def _sweep_objects(self, cutoff: float, summary: GcSummary, batch: int = 500) -> None:
        old: list[str] = []
        try:
            shards = sorted(os.scandir(self.objects), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(shard.path):
                if not KEY_PATTERN.fullmatch(entry.name) or entry.name[:2] != shard.name:
                    continue  # not ours: leave it alone
                try:
                    if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                        continue
                except FileNotFoundError:
                    continue
                old.append(entry.name)
                if len(old) >= batch:
                    self._drop_unrecorded(old, summary)
                    old = []
        if old:
            self._drop_unrecorded(old, summary)

    def _drop_unrecorded(self, keys: list[str], summary: GcSummary) -> None:
        stored = self.dq.store.blob_stored(keys)
        for key in keys:
            if key not in stored and self._delete_bytes(key, 0):
                summary.orphans += 1
