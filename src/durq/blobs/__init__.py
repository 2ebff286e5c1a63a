"""A content-addressed blob store whose bookkeeping lives in the durq database.

Bytes live in files under a local ``root`` directory, named by their sha256; the database
(tables ``blobs``, ``blob_refs``, ``blob_aliases``) records which blobs exist, who holds
them (named holders such as ``"chat:123"``, or jobs), logical names for them (aliases such
as ``"youtube:dQw4w9WgXcQ:22"``) and an external id (a CDN or chat-service file id) that
outlives the bytes. See ``docs/features/blobs.md``.

Layout under ``root``::

    objects/<k[:2]>/<k>        the bytes of blob k (k = sha256 hex)
    tmp/put-<random>.part      a put still writing (or one that crashed)
    tmp/gc-<k>-<random>        bytes a release has moved aside and is about to delete

With PostgreSQL, every process using the store must see the same ``root`` (one machine, or
a shared volume); the database cannot see files.

Example::

    dq = durq.Durq("sqlite:///jobs.db")
    blobs = BlobStore(dq, "/var/lib/app/blobs")
    key = blobs.put(open("video.mp4", "rb"), alias="youtube:abc:22", holder="chat:42")
    with blobs.open(key) as f:
        data = f.read()
    blobs.set_external_id(key, "BAACAgIAAxkB...")   # the chat service's file id
    blobs.unref(key, "chat:42")                      # the last holder: the bytes go,
    blobs.lookup("youtube:abc:22").external_id       # the record and its file id stay
"""

from durq.blobs.records import CHUNK, DEFAULT_GRACE, BlobInfo, GcSummary, Unref
from durq.blobs.store import BlobStore

__all__ = ["CHUNK", "DEFAULT_GRACE", "BlobInfo", "BlobStore", "GcSummary", "Unref"]
