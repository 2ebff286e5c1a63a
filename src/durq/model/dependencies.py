"""Jobs that depend on jobs: the records both backends share (docs/features/dependencies.md).

A dependency edge says "the child may run once the parent is terminal". A child with a
parent that has not finished is stored in the state ``waiting``; the transaction that makes
its last parent terminal moves it to ``queued`` (or cancels it, see :data:`CANCEL`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``on_parent_failure`` values. ``cancel`` (the default): when this parent ends failed,
#: cancelled or expired, the child is cancelled with the reason (and so are its own
#: children, edge by edge). ``run``: the child runs once the parent is terminal, whatever
#: its outcome.
CANCEL, RUN = "cancel", "run"
ON_PARENT_FAILURE = (CANCEL, RUN)

#: The ``kind`` of the error entry a child cancelled by its parent gets.
PARENT_FAILED_KIND = "parent_failed"

#: The ``kind`` of the error entry of a child failed, not run, because its payload with its
#: parents' results cannot be stored (over ``payload_limit``; on PostgreSQL, a NUL).
UNSTORABLE_PAYLOAD_KIND = "unstorable_payload"

#: The state of a job whose parents have not all finished.
WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class Parent:
    """One parent of a job to insert: an existing job's ``id``, or ``index``, the position
    of an earlier job of the same insert (so a graph is built in one transaction, and a
    cycle cannot be written: an edge only points back).

    ``pass_as`` names the child's argument that receives the parent's result when the child
    is queued; with ``pass_list`` that argument receives the list of the results of every
    parent edge marked so, in parent id order (a fan-in's member results).
    """

    id: int | None = None
    index: int | None = None
    on_failure: str = CANCEL
    pass_as: str | None = None
    pass_list: bool = False


@dataclass(frozen=True, slots=True)
class Edge:
    """A stored dependency edge as read back (``durq jobs show``, ``durq jobs tree``)."""

    parent_id: int
    child_id: int
    on_failure: str
    parent_state: str
    parent_task: str
    child_state: str
    child_task: str


@dataclass(frozen=True, slots=True)
class ParentResult:
    """A parent of a running job, for ``ctx.parent_results()``: its result is still JSON."""

    id: int
    task: str
    state: str
    result: str | None
