"""The plain enqueue path (issue 14): a task's checked template is reused, but never past a
change of the task's defaults, a batch or a payload it would have refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import durq
from durq.errors import ConfigError, PayloadError


def test_a_changed_default_is_seen_at_the_next_enqueue(tmp_path: Path) -> None:
    dq = durq.Durq(f"sqlite:///{tmp_path / 'q.db'}")
    try:

        @dq.task
        def work(n: int = 0) -> int:
            return n

        first = work.enqueue(n=1)
        work.queue = "other"
        work.priority = 5
        second = work.enqueue(n=2)
        assert (first.queue, first.priority) == ("default", 0)
        assert (second.queue, second.priority) == ("other", 5)
        assert dq.get(second.id).queue == "other"
        work.max_attempts = 0  # checked again, not taken from the cached template
        with pytest.raises(ConfigError):
            work.enqueue(n=3)
        work.max_attempts = 3
        with pytest.raises(PayloadError):
            work.enqueue(nope=1)
        with dq.batch() as batch:  # the open batch is looked up on every enqueue
            work.max_attempts = 2
            inside = work.enqueue(n=4)
        outside = work.enqueue(n=5)
        assert dq.get(inside.id).batch_id == batch.id
        assert dq.get(outside.id).batch_id is None
        ids = [first.id, second.id, inside.id, outside.id]
        assert ids == sorted(ids) and len(set(ids)) == 4
        assert [dq.get(i).payload for i in ids] == [{"n": 1}, {"n": 2}, {"n": 4}, {"n": 5}]
    finally:
        dq.close()
