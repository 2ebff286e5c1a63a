"""A database with jobs in every state, and hostile text in every field a page shows
(case 28), for the dashboard's tests."""

from __future__ import annotations

import json
import socket
from typing import Any

import durq
from durq.model import AttemptError, InHand, Outcome, WorkerInfo, WorkerReport

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


def fail_now(dq: durq.Durq, job_id: int, task: str) -> None:
    """Claim the queued job ``job_id`` (of ``task``; a worker ``w-fail``) and fail it for
    good: its children settle (a dependent with on_parent_failure="cancel" is cancelled)."""
    queue = dq.get(job_id).queue
    claimed = {c.id: c for c in dq.store.claim(queue, [task], 100, LEASE, "w-fail")}
    err = AttemptError(1, dq.store.now(), "RuntimeError", "boom", "", "permanent")
    c = claimed.pop(job_id)
    dq.store.finish([Outcome(c.id, c.lease_token, "failed", error=err)])
    for other in claimed.values():  # give back any other job it took
        dq.store.finish([Outcome(other.id, other.lease_token, "retry", error=err, delay=0)])


# -- long real-world values (issue dash-width): every page must fit 1280 px with them --

LONG_QUEUE = "tenant-acme-corp-production-eu-west-1-priority-high"
LONG_TASK = "myproject.integrations.billing.stripe.webhooks.handle_invoice_payment_succeeded"
LONG_CALLBACK = "myproject.integrations.billing.stripe.reconciliation.on_invoice_batch_reconciled"
LONG_SCHEDULE = (
    "myproject.integrations.billing.stripe.schedules.reconcile_unpaid_invoices_eu_west_1"
)
LONG_LIMIT = "tenant-acme-corp-production-eu-west-1:stripe-api.outbound.invoice-webhooks"
LONG_KEY = "stripe:evt_1OxYz2LkdIwHu7ixAbCdEfGhIjKlMnOp:invoice.payment_succeeded:tenant-acme-corp"
LONG_HOST = (
    "billing-webhook-consumers-7f9c8d6b5-x2k4q.tenant-acme-corp-production.eu-west-1.svc"
    ".cluster.local"
)
LONG_WORKER = f"{LONG_HOST}:48213:7f3a9c"
#: 20 tags, as a billing integration would put on its jobs.
TAGS = (
    "tenant:acme-corp-production-eu-west-1", "env:production", "region:eu-west-1", "provider:stripe",
    "event:invoice.payment_succeeded", "customer:cus_PqRsTuVwXyZaBc", "plan:enterprise-annual",
    "currency:eur", "source:webhook", "api-version:2024-06-20", "team:billing-platform",
    "priority:high", "retry-policy:exponential", "idempotent:true", "pii:none",
    "cost-centre:cc-4411", "service:billing-webhook-consumers", "release:2026.12.1",
    "shard:07", "trace:4bf92f3577b34da6a3ce929d0e0e4736",
)  # fmt: skip
#: A tag as long as a 100-character part with no separator in it.
LONG_TAG = "checksum:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" * 2
#: The width of populate_long's fan-in: past the 50 parents a job's page lists one by one.
FAN_IN = 55
#: A 500-character URL without a space in it.
LONG_URL = (
    "https://hooks.tenant-acme-corp.example.com/api/v2/webhooks/stripe/invoice.payment_succeeded"
    "?signature="
)
LONG_URL += ("0123456789abcdef" * 40)[: 500 - len(LONG_URL)]
#: A 2,000-character error message: words, the URL, then an HTML body.
LONG_MESSAGE = f"POST {LONG_URL} returned 502 Bad Gateway after 3 retries; response body: "
LONG_MESSAGE += ("<html><head><title>502 Bad Gateway</title></head><body>upstream timed out</body>"
                 "</html>" * 30)[: 2000 - len(LONG_MESSAGE)]  # fmt: skip
LONG_TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/srv/app/.venv/lib/python3.12/site-packages/myproject/integrations/billing/'
        f'stripe/webhooks/handlers/invoice_payment_succeeded_v{i}.py", line {100 + i}, in '
        f"handle_invoice_payment_succeeded\n    response = session.post({LONG_URL!r}, "
        "json=payload, timeout=30)\n"
        for i in range(12)
    )
    + f"requests.exceptions.HTTPError: {LONG_MESSAGE}\n"
)
BIG_PAYLOAD = {
    "invoice_id": "in_1OxYz2LkdIwHu7ixAbCdEfGh",
    "customer": "cus_PqRsTuVwXyZaBc",
    "callback_url": LONG_URL,
    "lines": [{"price": f"price_1OxYz2LkdIwHu7ix{i:04d}", "quantity": i} for i in range(40)],
}


def populate_long(dq: durq.Durq) -> dict[str, int]:
    """Jobs in every state on :data:`LONG_QUEUE` of :data:`LONG_TASK` with :data:`TAGS`, a
    failed one with :data:`LONG_MESSAGE` and :data:`LONG_TRACEBACK`, one with a big payload
    and result, a chain, a batch with a long callback, a long periodic schedule and limit
    key, a paused queue with a long reason, and a live worker :data:`LONG_WORKER` holding
    the running one. Returns the ids by role."""
    store = dq.store
    task = dq.task(name=LONG_TASK, queue=LONG_QUEUE, max_attempts=1, concurrency=2,
                   concurrency_key=LONG_LIMIT)(lambda **kw: kw)  # fmt: skip
    callback = dq.task(name=LONG_CALLBACK, queue=LONG_QUEUE)(
        lambda batch_id=0, outcome="", counts=None, meta=None: outcome
    )
    dq.periodic("*/5 * * * *", name=LONG_SCHEDULE, queue=LONG_QUEUE)(lambda: None)
    now = store.now()
    other_queues = tuple(LONG_QUEUE.replace("high", f"low-{i}") for i in range(4))
    store.register_worker(
        WorkerInfo(
            LONG_WORKER, LONG_HOST, 48213, (LONG_QUEUE, *other_queues),
            tuple(sorted(dq.tasks)), now, now, LEASE,
        )
    )  # fmt: skip

    def put(**options: Any) -> int:
        tags = (*TAGS, LONG_TAG)
        return dq.enqueue(LONG_TASK, BIG_PAYLOAD, tags=tags, meta={"trace": LONG_URL}, **options).id

    ids: dict[str, int] = {}
    # a fan-in on a queue of its own (the claims below take LONG_QUEUE's jobs), oldest: the
    # jobs list's first page stays the jobs below
    fan_queue = LONG_QUEUE.replace("high", "fan-in")
    group = dq.group([task.s(n=i).options(queue=fan_queue) for i in range(FAN_IN)])
    *members, fan_in = group.then(callback.s().options(queue=fan_queue, tags=TAGS))
    ids["fan_in"], ids["fan_member"] = fan_in.id, members[0].id
    ids["failed"] = put(key=LONG_KEY)
    ids["cancelled_by_parent"] = put(after=[ids["failed"]])  # cancelled when it fails
    ids["big"] = put()
    claimed = {c.id: c for c in store.claim(LONG_QUEUE, [LONG_TASK], 2, LEASE, LONG_WORKER)}
    bad, ok = claimed[ids["failed"]], claimed[ids["big"]]
    error = AttemptError(1, store.now(), "HTTPError", LONG_MESSAGE, LONG_TRACEBACK, "permanent")
    result = json.dumps({"receipt_url": LONG_URL, "ledger": BIG_PAYLOAD["lines"]})
    store.finish(
        [
            Outcome(bad.id, bad.lease_token, "failed", error=error),
            Outcome(ok.id, ok.lease_token, "succeeded", result=result),
        ]
    )
    ids["running"] = put()
    [running] = store.claim(LONG_QUEUE, [LONG_TASK], 1, LEASE, LONG_WORKER)
    assert running.id == ids["running"]
    store.report_worker(
        LONG_WORKER,
        WorkerReport("threads", 4, "0.1.0", (InHand(ids["running"], LONG_TASK, now),), 3, 1),
    )
    ids["queued"] = put()
    ids["scheduled"] = put(delay=3600)
    ids["parked"] = put(park=True)
    ids["cancelled"] = put()
    dq.cancel(ids["cancelled"])
    first, second = dq.chain(task.s(step=1, url=LONG_URL), task.s(step=2, url=LONG_URL))
    ids["chain_first"], ids["chain"] = first.id, second.id
    with dq.batch(on_complete=LONG_CALLBACK, meta={"url": LONG_URL}) as batch:
        for i in range(3):
            dq.enqueue(LONG_TASK, {"n": i, "url": LONG_URL})
    ids["batch"] = batch.id
    dq.pause(LONG_QUEUE, f"stripe is rate limiting us, see {LONG_URL}", source="auto")
    return ids
