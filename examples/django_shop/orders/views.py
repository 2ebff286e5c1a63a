"""Placing an order: the order and its ``ship`` job commit together, or neither does."""

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from orders.models import Order
from orders.tasks import send_note, ship

from durq.contrib.django import enqueue


class PaymentFailed(Exception):
    pass


def place_order(request: HttpRequest) -> HttpResponse:
    item = request.POST["item"]
    note = request.POST.get("note")
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item)
            job = enqueue(ship, order_id=order.id)  # in this transaction, on Django's connection
            if note is not None:
                try:
                    with transaction.atomic():  # a savepoint: the note may be refused alone
                        enqueue(send_note, order_id=order.id, note=note)
                        if len(note) > 40:
                            raise ValueError("note too long")
                except ValueError:
                    pass  # the savepoint rolled back, and its job with it
            if request.POST.get("fail"):
                raise PaymentFailed(item)  # rolls back the order and its job
    except PaymentFailed:
        return JsonResponse({"error": "payment failed"}, status=402)
    assert job is not None
    return JsonResponse({"order": order.id, "job": job.id})


def list_orders(request: HttpRequest) -> HttpResponse:
    rows = Order.objects.order_by("id").values("id", "item", "shipped")
    return JsonResponse(list(rows), safe=False)
