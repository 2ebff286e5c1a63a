"""A database with jobs in every state, and hostile text in every field a page shows
(case 28), for the dashboard's tests."""

from __future__ import annotations

import socket

import durq
from durq.model import AttemptError, Outcome, WorkerInfo, WorkerReport

IMG = "<img src=x onerror=alert(1)>"
XSS = IMG + '"><svg onload=alert(2)>'
JS_URL = "javascript:alert(3)"
LEASE = 30.0


def register_tasks(dq: durq.Durq) -> None:
    @dq.task(queue="mail", max_attempts=2)
    def send(to: str = "", note: str = "") -> str:
        return to

    @dq.task(queue="mail", concurrency=1, concurrency_key="smtp")
    def throttled(n: int = 0) -> int:
        return n

    @dq.task(queue=XSS)
    def hostile(x: str = "") -> str:
        return x


def populate(dq: durq.Durq) -> dict[str, int]:
    """Jobs in every state on queue ``mail`` (and one on a queue named like a script); a
    live worker ``w-<script>``. Returns the ids by role."""
    register_tasks(dq)
    store = dq.store
    now = store.now()
    store.register_worker(
        WorkerInfo(
            f"w-{XSS}", socket.gethostname(), 4242, ("mail", XSS),
            tuple(sorted(dq.tasks)), now, now, LEASE,
        )
    )  # fmt: skip
    store.report_worker(f"w-{XSS}", WorkerReport("threads", 4, "0.1.0", (), 3, 1))
    ids: dict[str, int] = {}
    ids["succeeded"] = dq.enqueue("send", {"to": XSS}, meta={XSS: JS_URL}, key=XSS).id
    ids["failed"] = dq.enqueue("send", {"to": "bob", "note": XSS}).id
    ids["running"] = dq.enqueue("send", {"to": "carol"}).id
    claimed = store.claim("mail", ["send"], 3, LEASE, f"w-{XSS}")
    by_id = {c.id: c for c in claimed}
    ok, bad = by_id[ids["succeeded"]], by_id[ids["failed"]]
    tb = f'Traceback (most recent call last):\n  File "app.py", line 1\nValueError: {XSS}\n'
    store.finish(
        [
            Outcome(ok.id, ok.lease_token, "succeeded", result=f'"{XSS}"'),
            Outcome(
                bad.id, bad.lease_token, "failed",
                error=AttemptError(1, now, "ValueError", XSS, tb, "permanent"),
            ),
        ]
    )  # fmt: skip
    ids["queued"] = dq.enqueue("send", {"to": "dave"}).id
    ids["scheduled"] = dq.enqueue("send", {"to": "erin"}, delay=3600).id
    ids["parked"] = dq.enqueue("send", {"to": "frank"}, park=True).id
    ids["cancelled"] = dq.enqueue("send", {"to": "gina"}).id
    dq.cancel(ids["cancelled"])
    ids["hostile"] = dq.enqueue("hostile", {"x": XSS}).id
    ids["big"] = dq.enqueue("send", {"to": "x" * 5000}).id
    return ids


def fail_jobs(dq: durq.Durq, queue: str, task: str, n: int, message: str = "boom") -> list[int]:
    """``n`` jobs of ``task`` on ``queue`` that failed for good (claimed and finished by a
    worker ``w-fail``, which this leaves registered); their ids."""
    store = dq.store
    ids = [dq.enqueue(task, {"n": i}, queue=queue).id for i in range(n)]
    claimed = store.claim(queue, [task], n, LEASE, "w-fail")
    now = store.now()
    err = AttemptError(1, now, "RuntimeError", message, "Traceback...\n", "permanent")
    store.finish([Outcome(c.id, c.lease_token, "failed", error=err) for c in claimed])
    return ids
