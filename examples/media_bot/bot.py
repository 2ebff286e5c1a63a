"""The media bot on durq: a chat bot that downloads the videos users send links to.

Write-up 000 built a job table, a worker pool, parked confirmations, a refcounted blob
index and a self-updating downloader on hand-written SQLite. Here each of those is a durq
feature: one ``fetch`` job per URL message (a concurrency limit of 3 shared with the inline
path through ``dq.limit``), retries classified off the downloader's ``ERROR:`` prose, the
status message kept in a step so every attempt edits the same one, big files parked until
the user confirms, bytes in ``durq.blobs`` keyed by ``extractor:id:format``, and a periodic
job that updates a copy of the downloader and renames it into place.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import durq
from durq.blobs import BlobStore
from durq.classify import PERMANENT, TRANSIENT, rule

QUEUE = "media"
LIMIT, SLOTS = "yt-dlp", 3  # "YTDLP_CONCURRENCY = 3", shared by jobs and inline queries
MAX_ATTEMPTS = 3  # "up to 3 attempts (2 retries)"
LARGE = 50_000_000  # bytes; bigger videos wait for the user's confirmation
FILE_HOLDER = "chat-file-id"  # a blob reference held while the chat knows the file's id
URL = re.compile(r"https?://\S+")


class DownloadError(Exception):
    """The downloader failed; the message is its ``ERROR:`` line (or its last words)."""


class ChatError(Exception):
    """The chat API refused a call: ``status`` and its description."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status


#: "fails fast on permanent ones (unsupported URL, private/removed/age-gated video, a webpage
#: 404/410)" and retries "network, 5xx, 408/429, a transient fragment 404".
RULES = [
    rule(PERMANENT, types=DownloadError, pattern=p, reason=n)
    for n, p in {
        "unsupported_url": r"Unsupported URL",
        "private_video": r"Private video",
        "removed": r"Video unavailable|has been removed|account .* terminated",
        "age_gated": r"Sign in to confirm your age|age-restricted",
        "page_gone": r"webpage: HTTP Error 4(04|10)",
    }.items()
] + [
    rule(TRANSIENT, types=DownloadError, pattern=p, reason=n)
    for n, p in {
        "server_side": r"HTTP Error (5\d\d|408|429)",
        "fragment": r"fragment",
        "network": r"timed out|Connection (reset|refused)|Temporary failure",
    }.items()
]


class Chat:
    """A tiny client of the chat bot API."""

    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")

    def call(self, method: str, **body: Any) -> Any:
        request = urllib.request.Request(
            f"{self.base}/{method}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())["result"]
        except urllib.error.HTTPError as exc:
            raise ChatError(exc.code, json.loads(exc.read())["description"]) from None

    def send(self, chat_id: int, text: str, **extra: Any) -> int:
        return int(self.call("sendMessage", chat_id=chat_id, text=text, **extra)["message_id"])

    def edit(self, chat_id: int, message_id: int, text: str, **extra: Any) -> None:
        self.call("editMessageText", chat_id=chat_id, message_id=message_id, text=text, **extra)


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class MediaBot:
    """The durq app (``self.dq``), its tasks, the blob store and the chat handlers."""

    def __init__(
        self,
        url: str,
        data_dir: Path,
        chat_url: str,
        *,
        time_scale: float = 1.0,
        update_cron: str = "*/5 * * * *",  # "YTDLP_UPDATE_INTERVAL = 5 min"
        large: int = LARGE,
        lease: float = 30.0,
    ) -> None:
        self.dq = durq.Durq(url)
        self.blobs = BlobStore(self.dq, data_dir / "blobs")
        self.work = data_dir / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.chat = Chat(chat_url)
        self.large = large
        self.lease = lease  # the jobs' lease, also that of the per-video hold
        self.fetch = self.dq.task(
            name="fetch",
            queue=QUEUE,
            max_attempts=MAX_ATTEMPTS,
            backoff=durq.tiers([5 * time_scale, 15 * time_scale]),
            classify=RULES,
            concurrency=SLOTS,
            concurrency_key=LIMIT,
        )(self._fetch)
        update = self.dq.task(
            name="update_downloader",
            queue="maintenance",
            max_attempts=1,
            concurrency=1,  # single-flight
            concurrency_key="yt-dlp-update",
        )(self._update_downloader)
        self.dq.periodic(update_cron, name="yt-dlp-update")(update)

    # -- the downloader -------------------------------------------------------------------

    def ytdlp(self, *args: str, via: str) -> str:
        """Run ``yt-dlp`` (found on PATH); its stdout, or DownloadError with its ERROR: line."""
        exe = shutil.which("yt-dlp") or "yt-dlp"
        env = {**os.environ, "MEDIA_BOT_VIA": via.split(":")[0], "MEDIA_BOT_JOB": via}
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, env=env)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
            raise DownloadError(next((x for x in lines if x.startswith("ERROR:")), lines[-1]))
        return done.stdout

    def metadata(self, url: str, via: str) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads(self.ytdlp("--dump-json", "--no-warnings", url, via=via))
        meta["logical"] = f"{meta['extractor']}:{meta['id']}:{meta['format_id']}"
        return meta

    def download(self, url: str, meta: dict[str, Any], via: str) -> Path:
        out = self.work / f"{uuid.uuid4().hex}.{meta['ext']}"
        self.ytdlp("-f", str(meta["format_id"]), "-o", str(out), url, via=via)
        return out

    def _update_downloader(self) -> dict[str, str]:
        """Copy the downloader, ``--update`` the copy, rename it into place (os.replace).

        Running downloads keep the old file (their inode); new ones see old or new, never
        the half-written file that an in-place ``--update`` leaves for a moment.
        """
        live = Path(shutil.which("yt-dlp") or "yt-dlp")
        copy = live.with_name(f".{live.name}.updating")
        shutil.copy2(live, copy)
        subprocess.run([str(copy), "--update"], check=True, capture_output=True, timeout=120)
        version = subprocess.run(
            [str(copy), "--version"], check=True, capture_output=True, text=True, timeout=60
        ).stdout.strip()
        os.replace(copy, live)
        say("downloader_updated", version=version)
        return {"version": version}

    # -- the queued path: one job per URL message -----------------------------------------

    def _fetch(
        self, chat_id: int, url: str, confirmed: bool = False, status: int | None = None
    ) -> dict[str, Any]:
        ctx = durq.context()
        # One status message per job, whatever the attempt: its id is a step result.
        status = status or ctx.step("status", self.chat.send, chat_id, "⏳ Downloading…")
        try:
            meta = self.metadata(url, via=f"job:{ctx.job_id}")
            if not confirmed and int(meta.get("filesize_approx") or 0) > self.large:
                return self._park(ctx, chat_id, url, status, meta)
            with self.dq.limit(
                f"video:{meta['logical']}", 1, lease=self.lease
            ):  # one fetch per video
                file_id = self.send_video(chat_id, url, meta, job=ctx.job_id)
        except Exception as exc:
            text = (  # the worker's own decision: classification and attempts left
                f"⚠️ {exc}\nretrying (attempt {ctx.attempt + 1} of {ctx.max_attempts})…"
                if ctx.will_retry(exc)
                else f"💥 {exc}"
            )
            self.chat.edit(chat_id, status, text)
            raise
        self.chat.edit(chat_id, status, f"✅ {meta['title']}")
        return {"file_id": file_id, "logical": meta["logical"]}

    def _park(
        self, ctx: durq.JobContext, chat_id: int, url: str, status: int, meta: dict[str, Any]
    ) -> dict[str, Any]:
        """A big video: park its download until the user answers (a park TTL of a day)."""
        parked = self.fetch.options(park=True, park_ttl=86400, key=f"confirm:{ctx.job_id}")
        job = parked.enqueue(chat_id=chat_id, url=url, confirmed=True, status=status)
        size = int(meta["filesize_approx"]) // 1_000_000
        buttons = [[{"text": "Download", "callback_data": f"confirm:{job.id}"},
                    {"text": "Cancel", "callback_data": f"cancel:{job.id}"}]]  # fmt: skip
        self.chat.edit(chat_id, status, f"📦 {meta['title']} is {size} MB. Download it?",
                       reply_markup={"inline_keyboard": buttons})  # fmt: skip
        return {"parked": job.id}

    def send_video(self, chat_id: int, url: str, meta: dict[str, Any], job: int) -> str:
        """Send the video by the chat's file id, else from stored bytes, else download it."""
        found = self.blobs.lookup(meta["logical"])
        key = None
        if found and found.stored:  # this job holds the bytes (a reference dies with the job)
            try:
                self.blobs.ref(found.key, job=job)
                key = found.key
            except durq.BlobNotFound:
                pass  # released a moment ago: download it again
        if found and found.external_id:
            try:
                result = self.chat.call("sendVideo", chat_id=chat_id, video=found.external_id)
                return str(result["file_id"])
            except ChatError as exc:
                if "wrong file identifier" not in str(exc):
                    raise
                self.forget_file(found.key)  # a stale memo: fall back to bytes or the source
        if key is None:
            path = self.download(url, meta, via=f"job:{job}")
            name = f"{meta['id']}.{meta['ext']}"
            key = self.blobs.put(path, name=name, alias=meta["logical"], job=job)
            path.unlink()
        with self.blobs.open(key) as f:
            data = base64.b64encode(f.read()).decode()
        file_id = str(self.chat.call("sendVideo", chat_id=chat_id, video_data=data)["file_id"])
        # The write-up's rule: bytes go only when unreferenced *and* the file id is unknown.
        # durq releases unreferenced bytes even with an external id, so the id holds a ref.
        self.blobs.ref(key, FILE_HOLDER)
        self.blobs.set_external_id(key, file_id)
        return file_id

    def forget_file(self, key: str) -> bool:
        """The chat no longer knows the file: drop its id; True if the bytes were released."""
        self.blobs.set_external_id(key, None)
        return self.blobs.unref(key, FILE_HOLDER).released

    # -- the chat side: handlers and the update loop --------------------------------------

    def handle(self, update: dict[str, Any]) -> None:
        """One update; errors are logged and contained (the write-up's ``bot.catch``)."""
        try:
            if "message" in update:
                msg = update["message"]
                found = URL.search(msg.get("text", ""))
                if found:  # persisted before the update is acknowledged
                    key = f"message:{msg['chat']['id']}:{msg['message_id']}"
                    job = self.fetch.options(key=key).enqueue(
                        chat_id=msg["chat"]["id"], url=found.group()
                    )
                    say("enqueued", job=job.id, url=found.group())
            elif "inline_query" in update:
                self.inline(update["inline_query"]["id"], update["inline_query"]["query"])
            elif "callback_query" in update:
                self.callback(update["callback_query"])
        except Exception as exc:  # noqa: BLE001 - contained, like bot.catch
            say("handler_error", update=update.get("update_id"), error=repr(exc))

    def inline(self, query_id: str, url: str) -> None:
        """Inline queries bypass the queue (an answer expires in seconds) but share its slots."""
        with self.dq.limit(LIMIT, SLOTS, lease=300, timeout=300):
            meta = self.metadata(url, via="inline")
            found = self.blobs.lookup(meta["logical"])
            if found and found.external_id:
                result = {
                    "type": "video",
                    "title": meta["title"],
                    "video_file_id": found.external_id,
                }
            else:
                path = self.download(url, meta, via="inline")
                result = {"type": "video", "title": meta["title"], "size": path.stat().st_size}
                path.unlink()
        self.chat.call("answerInlineQuery", inline_query_id=query_id, results=[result])

    def callback(self, query: dict[str, Any]) -> None:
        """Confirm or Cancel of a parked download: exactly one wins; the loser is told."""
        action, _, job_id = str(query.get("data", "")).partition(":")
        try:
            if action == "confirm":
                self.dq.adopt(int(job_id))
                text = "⬇️ Downloading…"
            else:
                self.dq.cancel(int(job_id), parked_only=True)
                text = "Cancelled."
        except (durq.JobGone, durq.JobNotFound):
            text = "Too late: this download was already confirmed, cancelled or expired."
        self.chat.call("answerCallbackQuery", callback_query_id=query["id"], text=text)
        say("callback", job=int(job_id), action=action, answer=text)

    def poll(self, stop: threading.Event, pool: ThreadPoolExecutor) -> None:
        """Long-poll updates; acknowledge a batch once its messages and callbacks are handled."""
        offset = 0
        while not stop.is_set():
            try:
                updates = self.chat.call("getUpdates", offset=offset, timeout=1)
            except (ChatError, OSError) as exc:
                say("poll_error", error=repr(exc))
                time.sleep(1)
                continue
            waits: list[Future[None]] = []
            for update in updates:
                done = pool.submit(self.handle, update)
                if "inline_query" not in update:  # inline answers run detached
                    waits.append(done)
                offset = int(update["update_id"]) + 1
            for done in waits:
                done.result()

    def serve(self, grace: float = 30.0) -> int:
        """The bot: the update loop in a thread, the durq worker in this one (SIGTERM: drain)."""
        stop = threading.Event()
        pool = ThreadPoolExecutor(8, thread_name_prefix="handler")
        threading.Thread(target=self.poll, args=(stop, pool), daemon=True).start()
        worker = self.dq.worker(concurrency=SLOTS + 3, lease=self.lease, grace=grace)
        say("bot_started", pid=os.getpid(), ytdlp=shutil.which("yt-dlp"))
        try:
            return int(worker.run(install_signals=True))
        finally:
            stop.set()
            pool.shutdown(wait=False)
            self.dq.close()
            sys.stdout.flush()
