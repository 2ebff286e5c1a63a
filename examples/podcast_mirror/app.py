"""The durq part of the podcast mirror: one task, its retry policy, a blob store.

``mirror_episode`` downloads one enclosure and stores it content-addressed. Everything
about failure is durq's job:

* a 404/410 ``HTTPError`` fails the job for good at once (durq's built-in classification);
* a 503, a 429 or a dropped connection is retried with ``tiers([0.2, 0.5, 1.0])`` seconds
  of backoff, or after the server's ``Retry-After``;
* a body over :data:`MAX_BYTES` raises :class:`durq.Permanent`, a short body
  :class:`durq.Transient`;
* every attempt, error and result is committed in ``durq.db`` before the worker lets go,
  so an interrupted run picks up where it stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

import durq

QUEUE: Final = "mirror"
#: Largest enclosure the mirror accepts, in bytes (256 KiB).
MAX_BYTES: Final = 256 * 1024
_CHUNK: Final = 64 * 1024
_HTTP_TIMEOUT: Final = 5.0  # seconds per socket operation


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the task downloads from and stores to; set once per process by :func:`configure`.

    Attributes:
        media_base: scheme, host and port of the media host, e.g. ``http://127.0.0.1:8123``.
            Not part of the job's payload: a re-run after an interruption serves the
            media on a new port, while the jobs it resumes keep their stored payload.
        blob_dir: root of the content-addressed store.
    """

    media_base: str
    blob_dir: Path


_settings: Settings | None = None


def configure(media_base: str, blob_dir: Path) -> None:
    """Set the process-wide :class:`Settings` the task reads (call before the worker runs)."""
    global _settings
    _settings = Settings(media_base.rstrip("/"), blob_dir)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_blob(root: Path, data: bytes) -> str:
    """Store ``data`` at ``root/ab/abcdef…`` (its sha256) unless already there.

    The bytes go to a temporary file in the target directory, are flushed and fsynced,
    renamed into place with :func:`os.replace`, and the directory is fsynced, so after a
    crash the blob is either complete or absent.

    Args:
        root: the blob store's root directory.
        data: the content.

    Returns:
        The sha256 hex digest (the blob's name).
    """
    digest = hashlib.sha256(data).hexdigest()
    final = root / digest[:2] / digest
    if final.exists():
        return digest
    created = not final.parent.exists()
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{digest[:12]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(final.parent)
    if created:
        _fsync_dir(root)
    return digest


def mirror_episode(feed: str, guid: str, url: str, title: str) -> dict[str, Any]:
    """Download one episode's enclosure and store it in the blob store.

    Args:
        feed: the feed's name (for reports).
        guid: the episode's guid (also the job's idempotency key).
        url: the enclosure URL from the feed; only its path is used, on the media host.
        title: the episode's title (for reports).

    Returns:
        ``{"sha256": hex digest, "bytes": size in bytes}``, stored as the job's result.

    Raises:
        urllib.error.HTTPError: a non-2xx answer (durq: 404/410 permanent, 429/5xx retried).
        durq.Permanent: the body is larger than :data:`MAX_BYTES`.
        durq.Transient: the body is shorter than its ``Content-Length``.
        RuntimeError: :func:`configure` was not called.
    """
    if _settings is None:
        raise RuntimeError("podcast_mirror.app.configure() was not called")
    ctx = durq.context()
    source = _settings.media_base + urlsplit(url).path
    request = urllib.request.Request(source, headers={"X-Attempt": str(ctx.attempt)})
    ctx.progress(0.0, f"attempt {ctx.attempt}/{ctx.max_attempts}: connecting")
    with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT) as response:
        declared = int(response.headers.get("Content-Length") or -1)
        if declared > MAX_BYTES:
            raise durq.Permanent(f"{declared} bytes is over the {MAX_BYTES}-byte limit")
        body = bytearray()
        while chunk := response.read(_CHUNK):
            body += chunk
            if len(body) > MAX_BYTES:
                raise durq.Permanent(f"body passed the {MAX_BYTES}-byte limit")
            if declared > 0:
                ctx.progress(min(1.0, len(body) / declared), "downloading")
    if declared >= 0 and len(body) != declared:
        raise durq.Transient(f"got {len(body)} of {declared} bytes", retry_after=0.5)
    digest = store_blob(_settings.blob_dir, bytes(body))
    ctx.progress(1.0, "stored")
    return {"sha256": digest, "bytes": len(body)}


def create_app(db_path: Path) -> tuple[durq.Durq, durq.Task[Any, Any]]:
    """The durq app on ``db_path`` with ``mirror_episode`` registered.

    Args:
        db_path: the SQLite file (created and migrated on first use).

    Returns:
        The app and the registered task.
    """
    dq = durq.Durq(f"sqlite:///{quote(str(db_path))}")
    task = dq.task(
        queue=QUEUE,
        max_attempts=4,
        backoff=durq.tiers([0.2, 0.5, 1.0]),  # seconds before the 2nd, 3rd, 4th attempt
        timeout=10,  # seconds per attempt
    )(mirror_episode)
    return dq, task
