"""The product's own database (plain :mod:`sqlite3`, a file apart from durq's) and its rules.

Tables as in write-up 001: ``podcasts``, ``episodes``, ``imports``, ``import_items``. This
module holds the write-up's data rules, none of which are durq's business: the merge of a
hosting migration (which fields are overwritten, overwritten per config, filled if missing,
never touched), the exactly-once episode insert, and the link matcher (±24 h window,
Sørensen-Dice title disambiguation).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS podcasts (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL, owner_email TEXT NOT NULL,
  hosting_type TEXT NOT NULL DEFAULT 'external', external_rss_url TEXT);
CREATE TABLE IF NOT EXISTS episodes (
  id INTEGER PRIMARY KEY, podcast_id TEXT NOT NULL, title TEXT, description TEXT,
  show_notes TEXT, status TEXT, audio_url TEXT, audio_content_type TEXT,
  audio_file_size_bytes INTEGER, audio_duration_seconds INTEGER, episode_guid TEXT,
  external_guid TEXT, external_rss_pub_date TEXT, published_at TEXT, is_explicit INTEGER,
  cover_image_url TEXT, episode_number INTEGER, season_number INTEGER,
  external_link_status TEXT, external_link_method TEXT,
  UNIQUE (podcast_id, episode_guid));
CREATE TABLE IF NOT EXISTS imports (
  id INTEGER PRIMARY KEY, podcast_id TEXT NOT NULL, is_hosting_migration INTEGER NOT NULL,
  use_rss_titles INTEGER NOT NULL DEFAULT 0, use_rss_descriptions INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'running', last_error TEXT, batch_id INTEGER,
  finalised INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS import_items (
  id INTEGER PRIMARY KEY, import_id INTEGER NOT NULL, guid TEXT NOT NULL, data TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending', reason TEXT, detail TEXT, episode_id INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0);
"""

#: Item states that close an item ("every terminal branch calls finaliseIfLastItem").
ITEM_TERMINAL = ("imported", "merged", "skipped_duplicate", "failed")

#: Merge rules of ``mergeAudioIntoExistingEpisode`` ('Hosting-migration merge mode').
ALWAYS = ("audio_url", "audio_content_type", "audio_file_size_bytes", "audio_duration_seconds",
          "episode_guid", "external_rss_pub_date", "published_at", "is_explicit")  # fmt: skip
PER_CONFIG = {"title": "use_rss_titles", "description": "use_rss_descriptions"}
FILL_IF_MISSING = ("cover_image_url", "episode_number", "season_number")
NEVER = ("show_notes",)  # and show_note_sections, which this example has no column for


@contextmanager
def connect(path: Path | str) -> Iterator[sqlite3.Connection]:
    """An autocommit connection (writes use :func:`write`); closed on exit."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction: committed on exit, rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def init(path: Path | str) -> None:
    """Create the tables if missing."""
    with connect(path) as conn:
        conn.executescript(SCHEMA)


def row(conn: sqlite3.Connection, sql: str, *args: Any) -> dict[str, Any] | None:
    """The first row of ``sql`` as a dict, or None."""
    found = conn.execute(sql, args).fetchone()
    return dict(found) if found is not None else None


# -- import items ---------------------------------------------------------------------------


def claim_item(conn: sqlite3.Connection, item_id: int, attempt: int) -> dict[str, Any] | None:
    """pending/processing -> processing; None when the item is already closed (ack it)."""
    with write(conn):
        n = conn.execute(
            "UPDATE import_items SET status = 'processing', attempts = ? "
            "WHERE id = ? AND status IN ('pending', 'processing')",
            (attempt, item_id),
        ).rowcount
    return row(conn, "SELECT * FROM import_items WHERE id = ?", item_id) if n else None


def close_item(conn: sqlite3.Connection, item_id: int, status: str, reason: str | None = None,
               detail: str | None = None, episode_id: int | None = None) -> bool:  # fmt: skip
    """processing -> a terminal ``status``; False if the item was not processing."""
    return (
        conn.execute(
            "UPDATE import_items SET status = ?, reason = ?, detail = ?, episode_id = ? "
            "WHERE id = ? AND status = 'processing'",
            (status, reason, (detail or "")[:500] or None, episode_id, item_id),
        ).rowcount
        == 1
    )


def reset_item(conn: sqlite3.Connection, item_id: int) -> None:
    """``resetItemForRetry``: processing -> pending, so the queue's retry finds it claimable."""
    with write(conn):
        conn.execute(
            "UPDATE import_items SET status = 'pending' WHERE id = ? AND status = 'processing'",
            (item_id,),
        )


def _episode_values(data: dict[str, Any], now: float) -> dict[str, Any]:
    published = datetime.fromisoformat(data["published"])
    return {
        "title": data["title"], "description": data["description"],
        "audio_url": data["audio_url"], "audio_content_type": data["type"],
        "audio_file_size_bytes": data["size"], "audio_duration_seconds": data["duration"],
        "episode_guid": data["guid"], "external_rss_pub_date": data["published"],
        "published_at": data["published"], "is_explicit": int(bool(data["explicit"])),
        "cover_image_url": data["image"], "episode_number": data["episode_number"],
        "season_number": data["season_number"],
        "status": "scheduled" if published.timestamp() > now else "published",
    }  # fmt: skip


def create_episode(conn: sqlite3.Connection, imp: dict[str, Any], item: dict[str, Any],
                   data: dict[str, Any], now: float) -> tuple[str, int]:  # fmt: skip
    """Create path, exactly once: insert and close the item in one transaction.

    Returns ``("imported" | "skipped_duplicate", episode id)``; ``("lost", 0)`` when the
    item was no longer ``processing`` (another delivery closed it first).
    """
    values = _episode_values(data, now)
    if imp["is_hosting_migration"]:
        values["external_guid"] = data["guid"]  # <guid> continuity for subscribers
    try:
        with write(conn):
            status, episode_id = _insert(conn, imp, item, data, values)
    except _ClaimLost:
        return "lost", 0
    return status, episode_id


class _ClaimLost(Exception):
    """The item was closed by another delivery: roll the insert back."""


def _insert(conn: sqlite3.Connection, imp: dict[str, Any], item: dict[str, Any],
            data: dict[str, Any], values: dict[str, Any]) -> tuple[str, int]:  # fmt: skip
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    cur = conn.execute(
        f"INSERT INTO episodes (podcast_id, {columns}) VALUES (?, {marks}) "
        "ON CONFLICT (podcast_id, episode_guid) DO NOTHING",
        (imp["podcast_id"], *values.values()),
    )
    if cur.rowcount == 1:
        status, episode_id = "imported", int(cur.lastrowid or 0)
    else:  # the same GUID is already an episode: a race or a duplicate in the feed
        found = row(conn, "SELECT id FROM episodes WHERE podcast_id = ? AND episode_guid = ?",
                    imp["podcast_id"], data["guid"])  # fmt: skip
        status, episode_id = "skipped_duplicate", int(found["id"]) if found else 0
    if not close_item(conn, item["id"], status, episode_id=episode_id):
        raise _ClaimLost
    return status, episode_id


def merge_episode(conn: sqlite3.Connection, imp: dict[str, Any], item: dict[str, Any],
                  existing: dict[str, Any], data: dict[str, Any], now: float) -> int:  # fmt: skip
    """Merge mode (``mergeAudioIntoExistingEpisode``) and close the item, in one transaction.

    ALWAYS fields are overwritten, PER_CONFIG ones when the import's flag is set,
    FILL_IF_MISSING ones only when the episode has none, and NEVER ones are not touched.
    """
    new = _episode_values(data, now)
    changes = {k: new[k] for k in ALWAYS}
    changes.update({k: new[k] for k, flag in PER_CONFIG.items() if imp[flag]})
    changes.update({k: new[k] for k in FILL_IF_MISSING if existing[k] is None})
    sets = ", ".join(f"{k} = ?" for k in changes)
    with write(conn):
        conn.execute(
            f"UPDATE episodes SET {sets} WHERE id = ?", (*changes.values(), existing["id"])
        )
        close_item(conn, item["id"], "merged", episode_id=existing["id"])
    return int(existing["id"])


# -- link attempts ----------------------------------------------------------------------------

#: 'Disambiguation rules'.
PROXIMITY_WINDOW = 24 * 3600.0
MIN_TOP_SCORE = 0.8
MIN_MARGIN = 0.15


def _bigrams(text: str) -> list[str]:
    s = " ".join(text.lower().split())
    return [s[i : i + 2] for i in range(len(s) - 1)]


def dice(a: str, b: str) -> float:
    """Sørensen-Dice coefficient on character bigrams (multiset), lower-cased, 0.0 to 1.0."""
    x, y = _bigrams(a), _bigrams(b)
    if not x or not y:
        return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
    rest = list(y)
    common = 0
    for gram in x:
        if gram in rest:
            rest.remove(gram)
            common += 1
    return 2.0 * common / (len(x) + len(y))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A feed item that might be the published episode."""

    guid: str
    title: str
    published: float  # epoch seconds


def pick(target: float, title: str, items: Sequence[Candidate], linked: set[str]
         ) -> tuple[Candidate | None, dict[str, Any]]:  # fmt: skip
    """The feed item to link, or None (retry later), and what was decided (for the log).

    Candidates: items within ±24 h of ``target`` whose guid is not in ``linked``. One
    candidate wins; several need a title winner with score >= 0.8 and >= 0.15 above the
    runner-up.
    """
    found = [c for c in items if abs(c.published - target) <= PROXIMITY_WINDOW]
    found = [c for c in found if c.guid not in linked]
    if len(found) == 1:
        return found[0], {"candidates": 1}
    if not found:
        return None, {"candidates": 0}
    scored = sorted(((dice(title, c.title), c) for c in found), key=lambda s: -s[0])
    top, runner_up = scored[0][0], scored[1][0]
    won = top >= MIN_TOP_SCORE and top - runner_up >= MIN_MARGIN
    info = {"candidates": len(found), "top_score": round(top, 3),
            "runner_up_score": round(runner_up, 3),
            "disambiguation": "matched" if won else "still_ambiguous"}  # fmt: skip
    return (scored[0][1] if won else None), info


def item_data(item: dict[str, Any]) -> dict[str, Any]:
    """The parsed feed item stored with an import item."""
    data: dict[str, Any] = json.loads(item["data"])
    return data
