"""durq under Django's test runner.

``TEST_RUNNER = "durq.contrib.django.testing.DurqTestRunner"``: after the test databases
are created the durq app is pointed at the test database (its tables are created on first
use), and its connections are closed before they are destroyed (PostgreSQL cannot drop a
database that durq still holds a pool on).

Use :class:`DurqTestCase` (a ``TransactionTestCase``: the jobs a view enqueued through the
ORM's connection must be committed for a drain, on durq's own connections, to see them)::

    class OrderTests(DurqTestCase):
        def test_order_ships(self):
            self.client.post("/orders/", {"item": "teapot"})
            self.assertEnqueued(ship, item="teapot")
            self.drain()
"""

from __future__ import annotations

from typing import Any

from django.test import TransactionTestCase
from django.test.runner import DiscoverRunner

from durq.contrib.django import get_app
from durq.job import Job
from durq.task import Task
from durq.testing import DrainResult, assert_enqueued, assert_not_enqueued, drain


class DurqTestRunner(DiscoverRunner):
    """Django's runner, with durq on the test database (see the module docstring)."""

    def setup_databases(self, **kwargs: Any) -> Any:
        get_app().close()  # reopened on the test database at first use
        return super().setup_databases(**kwargs)

    def teardown_databases(self, old_config: Any, **kwargs: Any) -> None:
        get_app().close()
        super().teardown_databases(old_config, **kwargs)


class DurqTestCase(TransactionTestCase):
    """A ``TransactionTestCase`` with durq's helpers; durq's jobs are deleted between tests
    (Django flushes only its own tables)."""

    def setUp(self) -> None:
        super().setUp()
        app = get_app()
        for queue in {t.queue for t in app.tasks.values()} | {"default"}:
            app.purge(queue, states=["queued", "running", "succeeded", "failed",
                                     "cancelled", "expired", "parked", "waiting"])  # fmt: skip

    def drain(self, **options: Any) -> DrainResult:
        """Run the queued jobs here (:func:`durq.testing.drain`)."""
        return drain(get_app(), **options)

    def assertEnqueued(self, task: Task[Any, Any], **payload: Any) -> Job:
        return assert_enqueued(task, **payload)

    def assertNotEnqueued(self, task: Task[Any, Any], **payload: Any) -> None:
        assert_not_enqueued(task, **payload)
