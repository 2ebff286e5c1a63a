"""The older code of a rolling deploy (issue 13, defect 1): it knows one schedule."""

from __future__ import annotations

import durq

dq = durq.Durq()  # DURQ_URL


@dq.periodic("* * * * * *", slot_arg="slot")  # every second
@dq.task(queue="rolling")
def old_beat(slot: int) -> int:
    return slot
