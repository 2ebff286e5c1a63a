"""The Django app config: at startup, import each installed app's ``tasks`` module so that
its tasks are registered on :func:`durq.contrib.django.get_app`; ``manage.py migrate``
(and the test runner's creation of the test database) also creates or upgrades durq's
tables."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class DurqConfig(AppConfig):
    name = "durq.contrib.django"
    label = "durq"
    verbose_name = "durq"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("tasks")
        post_migrate.connect(migrate_durq, sender=self)


def migrate_durq(sender: Any, using: str = "default", **_: Any) -> None:
    """After Django's migrations: durq's schema on the same database. Done here, not at a
    view's first enqueue: on SQLite, durq's first open (WAL mode, its tables) needs the
    write lock that the view's open transaction holds."""
    from durq.contrib.django import _settings, get_app

    app = get_app()
    if app.follows_django and using != _settings().get("DATABASE", "default"):
        return
    app.close()  # the database may be a new one (the test database)
    app.store.migrate()
    app.close()
