"""What the reports of ``durq verify`` and ``durq soak`` share: the verdict (reasons, the
``PASS``/``FAIL`` line, the first keys of the JSON), tables of figures, lists of job ids, and
database URLs as the reports show them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from rich.table import Table

from durq.store.sqlite.connection import parse_url as sqlite_parse_url


class Verdict:
    """Mixin of a report dataclass with ``url`` and ``queue`` fields: it says why the run
    failed (:meth:`reasons`) and which figures its last line shows (:meth:`figures`); the
    verdict follows from those."""

    __slots__ = ()

    url: str
    queue: str

    def reasons(self) -> list[str]:
        """Why the run failed; empty when it passed."""
        raise NotImplementedError

    def figures(self) -> str:
        """The main figures, for the last line."""
        raise NotImplementedError

    @property
    def passed(self) -> bool:
        return not self.reasons()

    def summary(self) -> str:
        """The final ``PASS: <figures>`` or ``FAIL: <reasons> (<figures>)`` line."""
        figures = self.figures()
        if self.passed:
            return f"PASS: {figures}"
        return f"FAIL: {'; '.join(self.reasons())} ({figures})"

    def verdict(self) -> dict[str, Any]:
        """The first keys of the report's JSON: ``passed``, ``summary``, ``reasons``, ``url``
        and ``queue``."""
        return {
            "passed": self.passed,
            "summary": self.summary(),
            "reasons": self.reasons(),
            "url": self.url,
            "queue": self.queue,
        }


def figure_table(title: str, rows: Iterable[tuple[str, str]]) -> Table:
    """A ``rich`` table titled ``title`` with one ``figure | value`` row per pair."""
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


def column_table(title: str, columns: Iterable[str]) -> Table:
    """An empty ``rich`` table titled ``title`` with these right-justified columns."""
    table = Table(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, justify="right")
    return table


def jobs_line(ids: Sequence[int], what: str, most: int) -> str:
    """``<count> job(s) <what>: <ids>``, for a reason: the ids are the first ``most``."""
    return f"{len(ids)} job(s) {what}: {', '.join(map(str, ids[:most]))}"


# -- database URLs ------------------------------------------------------------------------


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database."""
    return url.startswith(("postgres://", "postgresql://"))


def absolute_url(url: str) -> str:
    """The URL with a SQLite path made absolute (workers run in another directory).

    Raises:
        ConfigError: a malformed SQLite URL.
    """
    if is_postgres(url):
        return url
    opts = sqlite_parse_url(url)
    query = urlsplit(url).query if url.startswith("sqlite:") else ""
    path = quote(os.path.abspath(opts.path), safe="/")
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """The URL for messages: a PostgreSQL password is replaced by ``***``."""
    if is_postgres(url):
        from durq.store.postgres.connection import mask

        return mask(url)
    return url
