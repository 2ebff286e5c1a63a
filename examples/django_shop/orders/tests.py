"""The shop under Django's test runner, on SQLite or PostgreSQL (SHOP_DB): a rolled-back
request leaves no job, a committed one runs (cases 16 and 36)."""

from django.db import transaction
from orders.models import Order
from orders.tasks import send_note, ship

from durq.contrib.django import enqueue, get_app
from durq.contrib.django.testing import DurqTestCase


class OrderTests(DurqTestCase):
    def test_a_committed_request_enqueues_and_the_job_ships_the_order(self) -> None:
        placed = self.client.post("/orders/", {"item": "teapot"}).json()
        self.assertEnqueued(ship, order_id=placed["order"])
        result = self.drain()
        self.assertEqual(result.succeeded, [placed["job"]])
        self.assertEqual(get_app().get(placed["job"]).result, "teapot")
        self.assertTrue(Order.objects.get(id=placed["order"]).shipped)

    def test_a_rolled_back_request_leaves_neither_order_nor_job(self) -> None:
        reply = self.client.post("/orders/", {"item": "vase", "fail": "1"})
        self.assertEqual(reply.status_code, 402)
        self.assertEqual(Order.objects.count(), 0)
        self.assertEqual(get_app().jobs(), [])
        self.assertEqual(self.drain().ran, [])

    def test_a_rolled_back_savepoint_takes_only_its_own_job(self) -> None:
        kept = self.client.post("/orders/", {"item": "cup", "note": "happy birthday"}).json()
        refused = self.client.post("/orders/", {"item": "mug", "note": "x" * 50}).json()
        self.assertEnqueued(send_note, order_id=kept["order"])
        self.assertNotEnqueued(send_note, order_id=refused["order"])
        self.assertEnqueued(ship, order_id=refused["order"])
        self.assertEqual(len(self.drain().succeeded), 3)

    def test_three_levels_the_middle_rolls_back(self) -> None:
        """Case 36, step 2: J_mid and J_in never run; J0 runs once."""
        with transaction.atomic():
            outer = enqueue(ship, order_id=Order.objects.create(item="outer").id)
            try:
                with transaction.atomic():
                    enqueue(send_note, order_id=0, note="middle")
                    with transaction.atomic():
                        enqueue(send_note, order_id=0, note="inner")
                    raise RuntimeError("middle fails")
            except RuntimeError:
                pass
        assert outer is not None
        self.assertEqual([j.id for j in get_app().jobs()], [outer.id])
        self.assertEqual(self.drain().succeeded, [outer.id])

    def test_an_outer_rollback_takes_every_inner_job(self) -> None:
        """Case 36, step 3: nothing runs, no key stays held."""
        try:
            with transaction.atomic():
                enqueue(ship.options(key="order-9"), order_id=9)
                with transaction.atomic():
                    enqueue(send_note, order_id=9, note="inner")
                raise RuntimeError("outer fails")
        except RuntimeError:
            pass
        self.assertEqual(get_app().jobs(), [])
        again = ship.options(key="order-9").enqueue(order_id=9)  # the key is free
        self.assertEqual(again.state, "queued")
