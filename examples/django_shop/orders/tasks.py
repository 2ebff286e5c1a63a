"""The shop's tasks, found by durq.contrib.django at startup (like Celery's tasks.py)."""

from orders.models import Order

import durq
from durq.contrib.django import get_app

dq = get_app()


@dq.task
def ship(order_id: int) -> str:
    order = Order.objects.filter(id=order_id).first()
    if order is None:  # cannot happen: the job commits only with its order
        raise durq.Permanent(f"order {order_id} does not exist")
    order.shipped = True
    order.save(update_fields=["shipped"])
    return order.item


@dq.task
def send_note(order_id: int, note: str) -> None: ...
