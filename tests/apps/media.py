"""The media-bot seed on durq (tests/integration/test_blobs.py): a download task that
stores videos in the blob store under a logical key (extractor:id:format), so the same
video requested twice is downloaded once, and records the chat service's file id.

The database comes from DURQ_URL, the blob root from BLOB_ROOT. Each real download appends
a line to ``$RUNS_FILE``. ``CRASH_AFTER_PUT=<video>`` makes the first attempt of that video's
job die (``os._exit``) after its bytes were stored and before they were sent.
"""

from __future__ import annotations

import os

import durq
from durq.blobs import BlobStore

dq = durq.Durq()  # DURQ_URL
blobs = BlobStore(dq, os.environ["BLOB_ROOT"])


def fetch(video: str) -> bytes:
    """Stands in for yt-dlp: every call is a real download, recorded."""
    with open(os.environ["RUNS_FILE"], "a") as f:
        f.write(f"download {video}\n")
    return f"the bytes of {video}\n".encode() * 1000


@dq.task(max_attempts=5, queue="media")
def download(video: str, chat: int) -> dict[str, str]:
    ctx = durq.context()
    logical = f"fake:{video}:22"
    found = blobs.lookup(logical)
    if found is not None and found.external_id:
        return {"sent": found.external_id, "via": "file_id"}
    if found is not None and found.present:
        key = found.key
        blobs.ref(key, job=ctx.job_id)  # this job holds the bytes until it is pruned
    else:
        key = blobs.put(fetch(video), name=f"{video}.mp4", alias=logical, job=ctx.job_id)
    if os.environ.get("CRASH_AFTER_PUT") == video and ctx.attempt == 1:
        os._exit(137)
    with blobs.open(key) as f:
        f.read()  # "upload" to the chat
    file_id = f"chatfile-{video}"
    blobs.set_external_id(key, file_id)
    return {"sent": file_id, "via": "upload"}
