"""Read the bundled podcast RSS feeds into :class:`Episode` records.

The five feeds in ``feeds/`` are unmodified copies of real feeds (see ``feeds/SOURCES.md``).
Their quirks, and what this module does about each:

* ``giantbomb.xml``: every ``pubDate`` ends in ``PST``, summer dates too. The label is taken
  literally (UTC-8, which is what RFC 822 and :mod:`email.utils` say it means), so a summer
  date may be an hour off; it is only used for display and ordering. Each item's
  ``media:content`` repeats the enclosure and is ignored. ``itunes:duration`` is plain
  seconds, sometimes one digit.
* ``scotus.xml`` and ``podcasting20.xml``: the podcast namespace under its old GitHub URI;
  both URIs are accepted for ``podcast:transcript`` / ``podcast:chapters``.
* ``99pi.xml``: CRLF line endings (text is stripped); FeedBurner redirect URLs, with the
  real file in ``feedburner:origEnclosureLink`` (kept as :attr:`Episode.original_url`);
  ``itunes:duration`` as ``MM:SS`` or ``H:MM:SS``.
* ``cre.xml``: an ``<?xml-stylesheet?>`` instruction (ElementTree skips it), an extra
  ``bitlove:guid`` attribute on enclosures (ignored), inline Podlove ``psc:chapters``
  (counted).
* ``podcasting20.xml``: no XML declaration; ``pubDate`` in ``GMT`` or ``+0000``; one guid
  with ``isPermaLink="true"`` (the guid text is used either way); no ``itunes:duration``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

FEEDS_DIR = Path(__file__).resolve().parent / "feeds"

#: The feeds shipped with the example, by name (the file name without ``.xml``).
FEED_NAMES = ("podcasting20", "cre", "99pi", "scotus", "giantbomb")

_ITUNES = "http://www.itunes.com/dtds/podcast-1.0.dtd"
_FEEDBURNER = "http://rssnamespace.org/feedburner/ext/1.0"
_PSC = "http://podlove.org/simple-chapters"
_PODCAST_URIS = (
    "https://podcastindex.org/namespace/1.0",
    "https://github.com/Podcastindex-org/podcast-namespace/blob/main/docs/1.0.md",
)


@dataclass(frozen=True, slots=True)
class Episode:
    """One ``channel/item`` of a feed.

    Attributes:
        feed: the feed's name (e.g. ``"podcasting20"``).
        guid: the item's ``<guid>`` text, stripped; unique within its feed.
        title: the item's title, stripped.
        url: the enclosure URL as written in the feed.
        length: the enclosure's declared size, in bytes.
        type: the enclosure's MIME type.
        published: ``pubDate`` as a timezone-aware datetime.
        duration: ``itunes:duration`` in seconds, or None when absent or unreadable.
        transcripts: number of ``podcast:transcript`` links.
        chapters: number of chapter sources (``podcast:chapters`` or ``psc:chapter`` entries).
        original_url: FeedBurner's ``origEnclosureLink``, when the enclosure is a redirect.
    """

    feed: str
    guid: str
    title: str
    url: str
    length: int
    type: str
    published: datetime
    duration: int | None
    transcripts: int
    chapters: int
    original_url: str | None


def parse_duration(text: str | None) -> int | None:
    """Read ``itunes:duration``: ``SS``, ``MM:SS`` or ``H:MM:SS``.

    Args:
        text: the element's text, or None.

    Returns:
        The duration in seconds, or None if missing or not of those forms.
    """
    if not text or not text.strip():
        return None
    parts = text.strip().split(":")
    if len(parts) > 3 or not all(p.isdigit() for p in parts):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


def _text(item: ET.Element, tag: str) -> str:
    return (item.findtext(tag) or "").strip()


def _count(item: ET.Element, local: str, uris: tuple[str, ...]) -> int:
    return sum(len(item.findall(f"{{{uri}}}{local}")) for uri in uris)


def parse_item(feed: str, item: ET.Element) -> Episode:
    """Turn one ``<item>`` into an :class:`Episode`.

    Args:
        feed: the feed's name.
        item: the ``<item>`` element.

    Raises:
        ValueError: the item has no guid, no enclosure with a URL, or a bad length or date.
    """
    guid = _text(item, "guid")
    enclosure = item.find("enclosure")
    if not guid or enclosure is None or not enclosure.get("url"):
        raise ValueError(f"{feed}: item {_text(item, 'title')!r} lacks a guid or an enclosure url")
    psc = item.find(f"{{{_PSC}}}chapters")
    return Episode(
        feed=feed,
        guid=guid,
        title=_text(item, "title"),
        url=(enclosure.get("url") or "").strip(),
        length=int(enclosure.get("length") or "0"),
        type=enclosure.get("type") or "application/octet-stream",
        published=parsedate_to_datetime(_text(item, "pubDate")),
        duration=parse_duration(item.findtext(f"{{{_ITUNES}}}duration")),
        transcripts=_count(item, "transcript", _PODCAST_URIS),
        chapters=_count(item, "chapters", _PODCAST_URIS)
        + (len(psc.findall(f"{{{_PSC}}}chapter")) if psc is not None else 0),
        original_url=(item.findtext(f"{{{_FEEDBURNER}}}origEnclosureLink") or "").strip() or None,
    )


def load_feed(name: str, directory: Path = FEEDS_DIR) -> list[Episode]:
    """Parse ``<directory>/<name>.xml``.

    Args:
        name: the feed's name, e.g. ``"cre"``.
        directory: where the feed files are.

    Returns:
        Its episodes in feed order.

    Raises:
        FileNotFoundError: no such feed file.
        ValueError: a malformed item, or a guid that appears twice.
        xml.etree.ElementTree.ParseError: the file is not well-formed XML.
    """
    root = ET.parse(directory / f"{name}.xml").getroot()
    episodes = [parse_item(name, item) for item in root.iterfind("channel/item")]
    guids = [e.guid for e in episodes]
    if len(set(guids)) != len(guids):
        raise ValueError(f"{name}: duplicate guids")
    return episodes
