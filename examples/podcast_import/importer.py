"""The podcast import executor (write-up 001) on durq: three tasks and their producers.

* ``import_item``: one feed item of an import, create path or hosting-migration merge path;
  fatal / retryable / unclassified errors; the final attempt terminalises the item.
* ``finalise_import``: the batch's ``on_complete``: durq enqueues it once, in the same
  transaction as the last member's terminal state; it runs the side effects (cut-over only
  on ``completed``, RSS invalidation and e-mail best-effort).
* ``attempt_link``: match a published episode to its feed ``<guid>``; retried by
  re-enqueueing itself with a delay on the 5 min … 24 h schedule, then ``unmatched``.

The product's data lives in its own SQLite file (:mod:`.product`); durq holds the jobs.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import durq
from examples.podcast_mirror.feeds import parse_item

from . import product
from .product import connect, row, write

ITEM_QUEUE, LINK_QUEUE = "podcast-imports", "external-episode-link"
MAX_ATTEMPTS = 5  # "max_retries = 5"; the 5th attempt terminalises
PER_FILE_MAX_BYTES = 524_288_000  # "500 MB cap on audio stream"
LINK_SCHEDULE = (300.0, 900.0, 3600.0, 21600.0, 86400.0)  # 'Backoff schedule', attempts 0-4
_ITUNES = "{http://www.itunes.com/dtds/podcast-1.0.dtd}"

SETTINGS: dict[str, Any] = {"host": "http://127.0.0.1:9", "db": Path("product.db"),
                             "max_bytes": PER_FILE_MAX_BYTES}  # fmt: skip


def configure(host_url: str, product_db: Path, max_bytes: int = PER_FILE_MAX_BYTES) -> None:
    """Process-wide settings: the host's base URL and the product database (not payload)."""
    SETTINGS.update(host=host_url.rstrip("/"), db=product_db, max_bytes=max_bytes)
    product.init(product_db)


def log(event: str, **fields: Any) -> None:
    """One structured JSON line with a leading ``event`` field (``wrangler tail`` style)."""
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


class FatalImportError(durq.Permanent):
    """``FatalImportError``: the item fails now (``reason`` e.g. ``http_404``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


class RetryableImportError(durq.Transient):
    """``RetryableImportError``: retried with the write-up's backoff."""


def import_backoff(time_scale: float = 1.0) -> Callable[[int, BaseException | None], float]:
    """'Backoff formula': ``floor(min(900, 5*4^(attempts-1)) + random(0, min(30, base/4)))``.

    A callable, not ``durq.exponential``: durq's jitter is a symmetric fraction of the delay,
    the write-up's is additive and capped at 30 s. ``time_scale`` shrinks it (tests).
    """

    def delay(attempt: int, error: BaseException | None) -> float:
        base = min(900.0, 5.0 * 4.0 ** (attempt - 1))
        return math.floor(base + random.uniform(0, min(30.0, base / 4))) * time_scale

    return delay


def next_link_delay(attempt: int) -> float | None:
    """Seconds before link attempt ``attempt + 1``; None once the schedule is exhausted."""
    return LINK_SCHEDULE[attempt] if 0 <= attempt < len(LINK_SCHEDULE) else None


def read_feed(xml: bytes, name: str = "feed") -> list[dict[str, Any]]:
    """Feed items as the import stores them (podcast_mirror's parser plus the merge fields)."""
    items: list[dict[str, Any]] = []
    for el in ET.fromstring(xml).iterfind("channel/item"):
        image = el.find(f"{_ITUNES}image")
        extra: dict[str, Any] = {
            "description": (el.findtext("description") or "").strip() or None,
            "episode_number": _int(el.findtext(f"{_ITUNES}episode")),
            "season_number": _int(el.findtext(f"{_ITUNES}season")),
            "image": image.get("href") if image is not None else None,
            "explicit": (el.findtext(f"{_ITUNES}explicit") or "").strip() in ("yes", "true"),
        }
        try:
            e = parse_item(name, el)
        except ValueError:  # no enclosure: the worker fails it as parse_error
            guid = (el.findtext("guid") or el.findtext("title") or "").strip()
            items.append({"guid": guid, "title": el.findtext("title"), "audio_url": None})
            continue
        items.append({"guid": e.guid, "title": e.title, "audio_url": e.original_url or e.url,
                      "type": e.type, "length": e.length, "duration": e.duration,
                      "published": e.published.isoformat(), **extra})  # fmt: skip
    return items


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def _get(url: str, timeout: float = 10.0) -> Any:
    """GET a path of the host (only the path of ``url`` is used: the host moves ports)."""
    path = urlsplit(url).path
    headers = {"User-Agent": "show.fm-importer/1.0"}
    return urllib.request.urlopen(
        urllib.request.Request(SETTINGS["host"] + path, headers=headers), timeout=timeout
    )


def fetch_feed(url: str) -> list[dict[str, Any]]:
    """Fetch and parse a feed from the host."""
    with _get(url) as response:
        return read_feed(response.read())


def fetch_audio(url: str) -> tuple[int, str]:
    """Stream one enclosure; returns (bytes, content type).

    Raises:
        FatalImportError: 404/410 (``http_404``/``http_410``) or over the size cap
            (``skipped_oversize``).
        RetryableImportError: 5xx or 429, or no answer.
        RuntimeError, ValueError: anything else (unclassified: released and retried).
    """
    cap = int(SETTINGS["max_bytes"])
    try:
        with _get(url) as response:
            declared = int(response.headers.get("Content-Length") or -1)
            if declared > cap:
                raise FatalImportError("skipped_oversize", f"{declared} bytes > {cap}")
            ctype = response.headers.get_content_type()
            if not ctype.startswith(("audio/", "video/")):
                raise ValueError(f"the host sent {ctype}, not audio")
            size = 0
            while chunk := response.read(65536):
                size += len(chunk)
                if size > cap:
                    raise FatalImportError("skipped_oversize", f"over {cap} bytes")
            return size, ctype
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            raise FatalImportError(f"http_{exc.code}", f"GET {url}") from None
        if exc.code >= 500 or exc.code == 429:
            raise RetryableImportError(f"http_{exc.code} for {url}") from None
        raise RuntimeError(f"unexpected HTTP {exc.code} for {url}") from None
    except (OSError, TimeoutError) as exc:
        raise RetryableImportError(f"no answer for {url}: {exc}") from exc


def _post(path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        SETTINGS["host"] + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10):
        pass


def process_item(
    import_id: int, import_item_id: int, podcast_id: str, now: float
) -> dict[str, Any]:
    """``processItem``: claim the item, download, create or merge; raises to retry or fail."""
    ctx = durq.context()
    final = ctx.attempt >= ctx.max_attempts
    fields = {"import_id": import_id, "import_item_id": import_item_id, "attempt": ctx.attempt}
    with connect(SETTINGS["db"]) as conn:
        imp = row(conn, "SELECT * FROM imports WHERE id = ?", import_id)
        item = product.claim_item(conn, import_item_id, ctx.attempt) if imp else None
        if imp is None or item is None:
            log("import_gone" if imp is None else "item_already_claimed", **fields)
            return {"status": "already_closed"}
        data = product.item_data(item)
        try:
            if not data.get("audio_url"):
                raise FatalImportError("parse_error", "no enclosure url")
            data["size"], data["type"] = fetch_audio(data["audio_url"])
            key = f"podcasts/{podcast_id}/e/{{episode}}/audio/"
            ext = Path(urlsplit(data["audio_url"]).path).suffix or ".mp3"
            existing = imp["is_hosting_migration"] and row(
                conn, "SELECT * FROM episodes WHERE podcast_id = ? AND external_guid = ?",
                podcast_id, data["guid"])  # fmt: skip
            if existing:
                data["audio_url"] = key.format(episode=existing["id"]) + "migrated" + ext
                status, episode_id = "merged", product.merge_episode(
                    conn, imp, item, existing, data, now)  # fmt: skip
            else:
                slot = hashlib.sha1(data["guid"].encode()).hexdigest()[:12]
                data["audio_url"] = key.format(episode=slot) + "original" + ext
                status, episode_id = product.create_episode(conn, imp, item, data, now)
        except FatalImportError as exc:
            _terminalise(conn, import_item_id, exc.reason, str(exc), "import_item_failed", fields)
            raise
        except Exception as exc:
            if final:
                _terminalise(conn, import_item_id, "retries_exhausted", str(exc),
                             "import_item_terminalised", fields)  # fmt: skip
            elif isinstance(exc, RetryableImportError):
                product.reset_item(conn, import_item_id)
                log("import_item_retry", error=str(exc), **fields)
            else:
                product.reset_item(conn, import_item_id)
                log("import_item_threw", error=f"{type(exc).__name__}: {exc}", **fields)
            raise
    log("import_item_ack", status=status, episode_id=episode_id, **fields)
    return {"status": status, "episode_id": episode_id}


def _terminalise(conn: Any, item_id: int, reason: str, detail: str, event: str,
                 fields: dict[str, Any]) -> None:  # fmt: skip
    with write(conn):
        product.close_item(conn, item_id, "failed", reason, detail)
    log(event, reason=reason, detail=detail, **fields)


def finalise(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]
             ) -> dict[str, Any]:  # fmt: skip
    """``finaliseIfLastItem`` + ``sendSideEffects``, run once per batch completion."""
    import_id = int(meta["import_id"])
    with connect(SETTINGS["db"]) as conn:
        with write(conn):
            lost = conn.execute(  # a worker died on the final attempt: durq failed the job
                "UPDATE import_items SET status = 'failed', reason = 'lost' "
                "WHERE import_id = ? AND status IN ('pending', 'processing')", (import_id,)
            ).rowcount  # fmt: skip
            conn.execute("UPDATE imports SET status = ?, last_error = NULL, "
                         "finalised = finalised + 1 WHERE id = ?", (outcome, import_id))  # fmt: skip
        imp = row(conn, "SELECT * FROM imports WHERE id = ?", import_id) or {}
        pod = row(conn, "SELECT * FROM podcasts WHERE id = ?", imp.get("podcast_id")) or {}
        fields = {"import_id": import_id, "batch_id": batch_id, "outcome": outcome}
        log("import_finalised", counts=counts, lost=lost, **fields)
        migration = bool(imp.get("is_hosting_migration"))
        if migration and outcome == "completed":
            try:
                with write(conn):
                    conn.execute("UPDATE podcasts SET hosting_type = 'podcasterplus' "
                                 "WHERE id = ? AND hosting_type = 'external'", (pod["id"],))  # fmt: skip
                log("hosting_migration_cutover", podcast_id=pod["id"], **fields)
            except Exception as exc:  # noqa: BLE001 - the import fails; no RSS, no e-mail
                error = f"Hosting cutover failed: {exc}"
                with write(conn):
                    conn.execute("UPDATE imports SET status = 'failed', last_error = ? "
                                 "WHERE id = ?", (error, import_id))  # fmt: skip
                log("hosting_migration_cutover_failed", error=error, **fields)
                return {"outcome": "failed", "error": error}
        published = conn.execute(
            "SELECT e.status, count(*) FROM import_items i JOIN episodes e ON e.id = i.episode_id "
            "WHERE i.import_id = ? GROUP BY e.status", (import_id,)).fetchall()  # fmt: skip
    sent = []
    if not migration or outcome == "completed":  # a partial migration: hosting is still external
        sent += _best_effort("/rss-invalidation", "rss_invalidation_send_failed", fields, {
            "type": "import.completed", "podcast_id": pod.get("id"),
            "podcast_slug": pod.get("slug"), "timestamp": time.time()})  # fmt: skip
    sent += _best_effort("/email", "completion_email_failed", fields, {
        "to": pod.get("owner_email"), "import_id": import_id, "outcome": outcome,
        "counts": counts, "episodes": {s: n for s, n in published}})  # fmt: skip
    return {"outcome": outcome, "sent": sent}


def _best_effort(path: str, failed_event: str, fields: dict[str, Any], body: dict[str, Any]
                 ) -> list[str]:  # fmt: skip
    try:
        _post(path, body)
        return [path]
    except Exception as exc:  # noqa: BLE001 - logged and swallowed: item states stay
        log(failed_event, error=str(exc), **fields)
        return []


def link(dq: durq.Durq, episode_id: int, podcast_id: str, target_published_at: str,
         attempt: int, time_scale: float) -> dict[str, Any]:  # fmt: skip
    """``processLinkAttempt``: one attempt to match an episode to its feed ``<guid>``."""
    fields = {"episode_id": episode_id, "podcast_id": podcast_id, "attempt": attempt}

    def done(outcome: str, **more: Any) -> dict[str, Any]:
        log("external_link_attempt", outcome=outcome, **fields, **more)
        return {"outcome": outcome, **more}

    def unmatched(reason: str) -> dict[str, Any]:
        with write(conn):
            conn.execute("UPDATE episodes SET external_link_status = 'unmatched' "
                         "WHERE id = ? AND external_link_status = 'pending'", (episode_id,))  # fmt: skip
        return done("unmatched", reason=reason)

    def retry(**info: Any) -> dict[str, Any]:
        delay = next_link_delay(attempt)
        if delay is None:
            return unmatched("schedule_exhausted")
        dq.get_task("attempt_link").options(
            delay=delay * time_scale, key=f"link:{episode_id}:{attempt + 1}"
        ).enqueue(episode_id=episode_id, podcast_id=podcast_id,
                  target_published_at=target_published_at, attempt=attempt + 1)  # fmt: skip
        return done("retry", next_attempt=attempt + 1, delay=delay * time_scale, **info)

    with connect(SETTINGS["db"]) as conn:
        ep = row(conn, "SELECT * FROM episodes WHERE id = ?", episode_id)
        if ep is None or ep["external_link_status"] != "pending":
            return done("idempotent_ack")
        if ep["podcast_id"] != podcast_id:  # tenant guard: never write across tenants
            return done("tenant_mismatch", level="error", episode_podcast_id=ep["podcast_id"])
        pod = row(conn, "SELECT * FROM podcasts WHERE id = ?", podcast_id)
        if pod is None or not pod["external_rss_url"]:
            return unmatched("podcast_missing" if pod is None else "no_external_rss_url")
        if pod["hosting_type"] != "external":
            return done("podcast_internal_skip")
        try:
            target = datetime.fromisoformat(target_published_at)
            if target.tzinfo is None:
                raise ValueError("no time zone")
        except ValueError:
            return unmatched("malformed_target_published_at")
        try:
            items = fetch_feed(pod["external_rss_url"])
        except Exception as exc:  # noqa: BLE001 - the host may not have the episode yet
            return retry(error=f"feed: {exc}")
        linked = {r[0] for r in conn.execute(
            "SELECT external_guid FROM episodes WHERE podcast_id = ? AND id != ? "
            "AND external_guid IS NOT NULL", (podcast_id, episode_id))}  # fmt: skip
        candidates = [product.Candidate(i["guid"], i["title"] or "",
                                        datetime.fromisoformat(i["published"]).timestamp())
                      for i in items if i.get("published")]  # fmt: skip
        winner, info = product.pick(target.timestamp(), ep["title"] or "", candidates, linked)
        if "disambiguation" in info:
            log("external_link_title_disambiguation", **fields, **info)
        if winner is None:
            return retry(**info)
        with write(conn):
            conn.execute("UPDATE episodes SET external_guid = ?, external_link_status = 'linked', "
                         "external_link_method = 'auto' WHERE id = ? "
                         "AND external_link_status = 'pending'", (winner.guid, episode_id))  # fmt: skip
        return done("linked", guid=winner.guid, **info)


def create_app(url: str, time_scale: float = 1.0, clock: Callable[[], float] = time.time
               ) -> durq.Durq:  # fmt: skip
    """The durq app with the three tasks; ``time_scale`` shrinks every delay (tests)."""
    dq = durq.Durq(url, clock=clock)

    @dq.task(queue=ITEM_QUEUE, max_attempts=MAX_ATTEMPTS, backoff=import_backoff(time_scale))
    def import_item(import_id: int, import_item_id: int, podcast_id: str) -> dict[str, Any]:
        return process_item(import_id, import_item_id, podcast_id, dq.clock())

    @dq.task(queue=ITEM_QUEUE, max_attempts=3)
    def finalise_import(batch_id: int, outcome: str, counts: dict[str, int],
                        meta: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
        return finalise(batch_id, outcome, counts, meta)

    @dq.task(queue=LINK_QUEUE, max_attempts=3)  # "max_retries = 2": redelivery only
    def attempt_link(episode_id: int, podcast_id: str, target_published_at: str,
                     attempt: int = 0) -> dict[str, Any]:  # fmt: skip
        return link(dq, episode_id, podcast_id, target_published_at, attempt, time_scale)

    return dq


# -- producers ------------------------------------------------------------------------------


def start_import(dq: durq.Durq, podcast_id: str, *, migration: bool = False,
                 use_rss_titles: bool = False, use_rss_descriptions: bool = False,
                 limit: int | None = None) -> tuple[int, int]:  # fmt: skip
    """Fetch the podcast's feed, store an import with one item per episode, and enqueue one
    ``import_item`` job per item as one durq batch. Returns (import id, batch id).

    Raises:
        KeyError: no such podcast.
    """
    with connect(SETTINGS["db"]) as conn:
        pod = row(conn, "SELECT * FROM podcasts WHERE id = ?", podcast_id)
        if pod is None:
            raise KeyError(podcast_id)
        items = fetch_feed(pod["external_rss_url"])[:limit]
        with write(conn):
            import_id = int(conn.execute(
                "INSERT INTO imports (podcast_id, is_hosting_migration, use_rss_titles, "
                "use_rss_descriptions) VALUES (?, ?, ?, ?)",
                (podcast_id, migration, use_rss_titles, use_rss_descriptions)).lastrowid or 0)  # fmt: skip
            ids = [int(conn.execute(
                "INSERT INTO import_items (import_id, guid, data) VALUES (?, ?, ?)",
                (import_id, i["guid"], json.dumps(i))).lastrowid or 0) for i in items]  # fmt: skip
        task = dq.get_task("import_item")
        with dq.batch(
            on_complete=dq.get_task("finalise_import"), meta={"import_id": import_id}
        ) as batch:
            jobs = task.enqueue_many(
                [
                    {"import_id": import_id, "import_item_id": i, "podcast_id": podcast_id}
                    for i in ids
                ],
                keys=[f"item:{i}" for i in ids],
            )
        with write(conn):  # an item's job is found again by its key (dq.find), not stored
            conn.execute("UPDATE imports SET batch_id = ? WHERE id = ?", (batch.id, import_id))
    log("import_items_enqueued", import_id=import_id, batch_id=batch.id, sent=len(jobs),
        expected=len(ids))  # fmt: skip
    return import_id, batch.id


def retry_failed(dq: durq.Durq, import_id: int) -> list[int]:
    """``/:id/retry-failed``: failed items back to pending and their jobs retried (this
    reopens the batch, so it completes, and finalises, again). Returns the item ids."""
    with connect(SETTINGS["db"]) as conn:
        failed = conn.execute("SELECT id FROM import_items WHERE import_id = ? "
                              "AND status = 'failed'", (import_id,)).fetchall()  # fmt: skip
        with write(conn):
            conn.execute("UPDATE import_items SET status = 'pending', reason = NULL, detail = NULL "
                         "WHERE import_id = ? AND status = 'failed'", (import_id,))  # fmt: skip
            conn.execute("UPDATE imports SET status = 'running' WHERE id = ?", (import_id,))
    for (item_id,) in failed:
        job = dq.find(ITEM_QUEUE, f"item:{item_id}")  # the key the enqueue gave it
        if job is not None:
            dq.retry(job.id)
    return [int(r[0]) for r in failed]


#: 'Message routing': the write-up's ``message.body.type`` -> the durq task it becomes.
ROUTES = {"import_item": "import_item", "attempt_link": "attempt_link"}


def route(dq: durq.Durq, message: dict[str, Any]) -> durq.Job | None:
    """Enqueue a write-up-shaped message by its ``type``; unknown types are logged and
    dropped (acknowledged), so a schema mismatch cannot flood the dead-letter set."""
    body = dict(message)
    task = ROUTES.get(str(body.pop("type", "")))
    if task is None:
        log("unknown_message_type", type=message.get("type"))
        return None
    return dq.enqueue(task, body)
