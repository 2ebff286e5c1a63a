"""durq in a Django project: one app on Django's own database, the outbox through the
ORM's connection, and ``manage.py durq_worker`` / ``manage.py durq``.

settings.py::

    INSTALLED_APPS = [..., "durq.contrib.django"]
    DURQ = {"DATABASE": "default"}      # or {"URL": "postgresql://..."}; default: "default"
    TEST_RUNNER = "durq.contrib.django.testing.DurqTestRunner"   # see durq.contrib.django.testing

orders/tasks.py (found at startup, like Celery's autodiscovery)::

    from durq.contrib.django import get_app
    dq = get_app()

    @dq.task
    def ship(order_id: int) -> None: ...

orders/views.py::

    from durq.contrib.django import enqueue
    with transaction.atomic():
        order = Order.objects.create(...)
        enqueue(ship, order_id=order.id)     # commits with the order, or not at all

See docs/features/frameworks.md.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from durq.app import Durq
from durq.errors import ConfigError
from durq.job import Job
from durq.task import BoundTask, Task

_app: DjangoDurq | None = None


def _settings() -> dict[str, Any]:
    from django.conf import settings

    value = getattr(settings, "DURQ", {}) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"settings.DURQ must be a dict, not {type(value).__name__}")
    unknown = set(value) - {"URL", "DATABASE", "SCHEMA", "OPTIONS"}
    if unknown:
        raise ConfigError(f"unknown settings.DURQ key(s) {sorted(unknown)}")
    return value


def database_url(alias: str | None = None) -> str:
    """The durq URL of a Django database (default: ``DURQ["DATABASE"]`` or ``default``),
    as Django has it now (under the test runner: the test database).

    PostgreSQL: ``postgresql://USER:PASSWORD@HOST:PORT/NAME?schema=durq`` (durq's tables in
    their own schema, ``DURQ["SCHEMA"]``); SQLite: the file's absolute path.

    Raises:
        ConfigError: the database is neither SQLite nor PostgreSQL, or is in memory.
    """
    from django.db import connections

    conf = _settings()
    settings_dict = connections[alias or conf.get("DATABASE", "default")].settings_dict
    engine = str(settings_dict["ENGINE"])
    name = str(settings_dict.get("NAME") or "")
    if engine.endswith("sqlite3"):
        if not name or name == ":memory:" or name.startswith("file:memorydb"):
            raise ConfigError(
                "durq needs the SQLite database in a file, not in memory (for tests: "
                "DATABASES['default']['TEST'] = {'NAME': 'test.sqlite3'})"
            )
        return f"sqlite:///{os.path.abspath(name)}"
    if "postgresql" in engine:
        user = quote(str(settings_dict.get("USER") or ""), safe="")
        password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = str(settings_dict.get("HOST") or "localhost")
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        schema = conf.get("SCHEMA", "durq")
        return f"postgresql://{auth}{host}{port}/{quote(name, safe='')}?schema={schema}"
    raise ConfigError(f"durq runs on SQLite or PostgreSQL, not on Django's {engine}")


class DjangoDurq(Durq):
    """A :class:`durq.Durq` whose database follows Django's settings: ``DURQ["URL"]`` when
    given, else the Django database's URL, read when the store is opened (so under the
    test runner it is the test database)."""

    def __init__(self, **options: Any) -> None:
        url = _settings().get("URL")
        super().__init__(url or "sqlite:///durq-django-unset.db", **options)
        self.follows_django = url is None

    def _resolve_url(self) -> str:
        return database_url() if self.follows_django else self.url

    def on_djangos_database(self) -> bool:
        """Whether durq's tables are in the Django database (so the outbox can work)."""
        return self.follows_django


def get_app() -> DjangoDurq:
    """The project's one durq app (made on first call from ``settings.DURQ``)."""
    global _app
    if _app is None:
        _app = DjangoDurq(**_settings().get("OPTIONS", {}))
    return _app


def raw_connection(alias: str | None = None) -> Any:
    """The driver connection under Django's connection (psycopg 3 or sqlite3), opened
    if needed; inside ``transaction.atomic()`` it is in that transaction."""
    from django.db import connections

    conn = connections[alias or _settings().get("DATABASE", "default")]
    conn.ensure_connection()
    return conn.connection


def enqueue(task: Task[Any, Any] | BoundTask, /, **payload: Any) -> Job | None:
    """Enqueue ``task(**payload)`` through Django's own database connection: inside a
    ``transaction.atomic()`` block the job is written in that transaction and exists if
    and only if it commits (a rolled-back inner block — a savepoint — takes its jobs with
    it); outside one, Django's autocommit commits it at once.

    When ``DURQ["URL"]`` puts durq on another database, the ORM's transaction cannot hold
    the job: it is then enqueued by ``transaction.on_commit`` (after the commit; lost if
    the process dies in between — prefer durq on Django's database) and None is returned.

    Returns:
        The :class:`durq.Job` (its id is known before the commit), or None (deferred).

    Raises:
        ConfigError: Django's PostgreSQL driver is psycopg2 (durq writes through psycopg 3).
        PayloadError, PayloadTooLarge: the payload is refused (nothing written).
    """
    app = task.task.app if isinstance(task, BoundTask) else task.app
    if isinstance(app, DjangoDurq) and not app.on_djangos_database():
        from django.db import transaction

        transaction.on_commit(lambda: task.enqueue(**payload), robust=False)
        return None
    raw = raw_connection()
    module = type(raw).__module__.split(".")[0]
    if module not in ("psycopg", "sqlite3"):
        raise ConfigError(
            f"durq enqueues through psycopg 3 or sqlite3, not Django's {module} connection "
            "(pip install 'psycopg[binary]'; Django 4.2+ then uses it)"
        )
    return task.options(connection=raw).enqueue(**payload)
