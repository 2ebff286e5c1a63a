"""The heartbeat's reading of the leases it extends (``durq.worker.services.held_leases``):
a job that leaves the prefetch for a slot between the two reads is still in one of them.
Read slots first, it was in neither, and that beat left its lease alone (with a 1 s lease
and a late next beat, CI saw it lapse)."""

from __future__ import annotations

from durq.context import JobContext
from durq.model import Claimed
from durq.worker.prefetch import Prefetch
from durq.worker.services import held_leases
from durq.worker.state import Attempt, InFlight


def _claimed(job_id: int, token: int) -> Claimed:
    return Claimed(job_id, "default", "work", "{}", 1, 3, token)


class _StartsAfterRead:
    """Real ``leases`` of the prefetch or the slots, after which the waiting job starts
    at once (a runner thread that frees a slot just then)."""

    def __init__(self, prefetch: Prefetch, slots: InFlight) -> None:
        self.prefetch, self.slots = prefetch, slots

    def start(self) -> None:
        def run(job: Claimed) -> None:
            ctx = JobContext(job.id, job.task, job.queue, 1, 3, job.lease_token, lambda *_: True)
            self.slots.add(Attempt(job, ctx))

        self.prefetch.start(self.slots.free_slots, run)


class _Prefetch(Prefetch):
    mover: _StartsAfterRead

    def leases(self) -> list[tuple[int, int]]:
        read = super().leases()
        self.mover.start()
        return read


class _InFlight(InFlight):
    mover: _StartsAfterRead

    def leases(self) -> list[tuple[int, int]]:
        read = super().leases()
        self.mover.start()
        return read


def test_a_job_that_starts_between_the_two_reads_keeps_its_lease() -> None:
    prefetch, slots = _Prefetch(depth=8, slots=1), _InFlight(1)
    prefetch.mover = slots.mover = _StartsAfterRead(prefetch, slots)
    prefetch.put([_claimed(7, 70)])
    ahead, running = held_leases(prefetch, slots)
    assert len(slots) == 1 and len(prefetch) == 0  # it did move, between the reads
    assert (7, 70) in ahead + running
