"""The newer code of a rolling deploy (issue 13, defect 1): the old schedule and a new one
whose task only this code knows."""

from __future__ import annotations

import durq

dq = durq.Durq()  # DURQ_URL


@dq.periodic("* * * * * *", slot_arg="slot")
@dq.task(queue="rolling")
def old_beat(slot: int) -> int:
    return slot


@dq.periodic("* * * * * *", name="new_report", slot_arg="slot")
@dq.task(queue="reports", priority=5)
def new_report(slot: int) -> int:
    return slot
