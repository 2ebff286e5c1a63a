"""The generation bot on durq: its tasks, the provider chain, maintenance and the failure path.

Write-up 004 hand-rolled a jobs table, worker slots, a sweeper for the 5- and 15-minute
deadlines, a requeue-on-shutdown step, stale-job queries at start, a ``settings`` row for
the maintenance pause and an alert cooldown table. Here durq has all of those; what is left
is the provider chain (an in-job retry loop, the write-up's 429 table) and the texts.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import durq
from durq.retry import parse_retry_after

QUEUE = "generation"  # the guest flow: paused by maintenance
NOTIFY_QUEUE = "notify"  # messages to guests: never paused
LEADS_QUEUE = "leads"  # the leads module: unaffected by maintenance
MAX_ATTEMPTS = 2  # MAX_ATTEMPTS
JOB_RETRY_DELAY = 10.0  # "10 s before requeue"
GENERATION_SLOTS = 2  # worker slots: generation jobs at once, across processes
NOTICE_AFTER = 5 * 60.0  # "still working" notice, from created_at
DEADLINE = 15 * 60.0  # failure text, from created_at
SHUTDOWN_GRACE = 15.0  # SHUTDOWN_GRACE_SEC
FREE_REQUEUES = 2  # SHUTDOWN_FREE_REQUEUES
PROVIDERS = ("primary", "fallback")
PROVIDER_DELAYS = (5.0, 15.0, 30.0)  # 429: three retries
MAX_HINT = 60.0  # the provider's Retry-After is followed up to 60 s
JITTER = 0.2  # plus up to 20 %
MESSAGE_ATTEMPTS, MESSAGE_PAUSE = 3, 2.0  # "Message to the guest ... | 3 | 2 s"
ALERT_COOLDOWN = 600.0  # same-key alerts suppressed for 10 minutes and counted
ADMIN_CHAT, LEADS_CHAT = "admin", "leads"

TEXTS = {
    "pack": "Your sticker pack is ready: {pack}",
    "slow": "Still working on your stickers, thank you for waiting.",
    "failed": "Sorry, we could not make your stickers this time. Please try again.",
    "unavailable": "Generation is temporarily unavailable. Your photo is saved; "
    "we will be back soon.",
}


class ProviderError(Exception):
    """A provider did not answer 200: its status, Retry-After hint (s) and daily-quota flag."""

    def __init__(self, provider: str, status: int, error: str, retry_after: float | None):
        super().__init__(f"{provider}: HTTP {status} {error}")
        self.status, self.error, self.retry_after = status, error, retry_after


class GenerationError(durq.Transient):
    """No provider produced a pack: the job is retried (``MAX_ATTEMPTS`` in all)."""


class BillingExhausted(durq.Permanent):
    """Every provider that answered said "no money" (402): fail at once, pause, alert."""


def provider_delay(retry: int, hint: float | None, scale: float = 1.0) -> float:
    """Seconds before retry ``retry`` (0-based) of a call that got a 429.

    The tier 5, 15, 30 s, or the provider's ``Retry-After`` hint capped at 60 s, plus a
    uniform 0-20 % jitter, times ``scale`` (write-up 004, "Provider call on 429").
    """
    base = min(hint, MAX_HINT) if hint is not None else PROVIDER_DELAYS[retry]
    return base * (1.0 + JITTER * random.random()) * scale


@dataclass
class Bot:
    """The durq app and its tasks (see :func:`create_app`)."""

    dq: durq.Durq
    generate: durq.Task[Any, Any]
    tell: durq.Task[Any, Any]
    publish_lead: durq.Task[Any, Any]
    scale: float


def _post(url: str, body: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def create_app(url: str, *, chat_url: str, ai_url: str, time_scale: float = 1.0) -> Bot:
    """The bot's durq app on ``url``. ``time_scale`` multiplies every delay, the deadlines
    and the shutdown grace (tests run minutes as seconds)."""
    dq = durq.Durq(url)
    s = time_scale

    def send(chat_id: str, text: str) -> None:
        _post(f"{chat_url}/chat/sendMessage", {"chat_id": chat_id, "text": text})

    @dq.on_alert
    def to_admins(alert: durq.Alert) -> None:  # one try; a failure is only logged (by durq)
        more = f" (+{alert.suppressed} suppressed)" if alert.suppressed else ""
        send(ADMIN_CHAT, f"[{alert.severity}] {alert.key}: {alert.message}{more}")

    @dq.task(queue=NOTIFY_QUEUE, max_attempts=MESSAGE_ATTEMPTS,
             backoff=durq.constant(MESSAGE_PAUSE * s))  # fmt: skip
    def tell(chat_id: str, text: str) -> None:
        """Send one message to a guest (keyed by the caller, so each is enqueued once)."""
        send(chat_id, text)

    def tell_once(job: durq.Job, what: str, **fields: Any) -> None:
        text = TEXTS[what].format(**fields)
        tell.options(key=f"{what}:{job.id}").enqueue(chat_id=job.payload["chat_id"], text=text)

    def on_slow(job: durq.Job) -> None:
        if job.state in ("queued", "running"):
            tell_once(job, "slow")

    def on_expire(job: durq.Job) -> None:
        tell_once(job, "failed")

    def report_failure(job: durq.Job) -> None:
        """``on_fail`` of ``generate``: the job ended ``failed`` by any path (its last
        attempt, a 402, the reaper after a kill, a charged shutdown requeue). durq runs it
        once, as a hook job on the ``notify`` queue: tell the guest, and the admins unless it
        was billing (already alerted)."""
        err = job.last_error
        if err is not None and err.type.rsplit(".", 1)[-1] == BillingExhausted.__name__:
            tell_once(job, "unavailable")
            return
        tell_once(job, "failed")
        why = f"{err.kind}: {err.message}" if err else "unknown"
        dq.alert(f"generation_failed:{job.id}", f"job {job.id} failed after "
                 f"{job.attempts} attempt(s): {why}", severity="error", cooldown=ALERT_COOLDOWN)  # fmt: skip

    def call(provider: str, photo: str) -> str:
        try:
            return str(_post(f"{ai_url}/ai/{provider}/generate", {"photo": photo})["pack"])
        except urllib.error.HTTPError as exc:
            error = str(json.loads(exc.read() or b"{}").get("error", exc.reason))
            hint = parse_retry_after(exc.headers.get("Retry-After"), time.time())
            raise ProviderError(provider, exc.code, error, hint) from None
        except OSError as exc:
            raise ProviderError(provider, 0, f"no answer: {exc}", None) from exc

    @dq.task(queue=QUEUE, max_attempts=MAX_ATTEMPTS, backoff=durq.constant(JOB_RETRY_DELAY * s),
             concurrency=GENERATION_SLOTS, deadline_in=DEADLINE * s, notice_after=NOTICE_AFTER * s,
             on_slow=on_slow, on_expire=on_expire, on_fail=report_failure,
             hook_queue=NOTIFY_QUEUE)  # hooks run while generation is paused  # fmt: skip
    def generate(chat_id: str, photo: str) -> dict[str, Any]:
        """Make a pack from ``photo``: each provider in turn, 429s retried in the job."""
        ctx = durq.context()
        billing, errors = False, []
        for provider in PROVIDERS:
            for retry in range(len(PROVIDER_DELAYS) + 1):
                try:
                    pack = call(provider, photo)
                except ProviderError as exc:
                    errors.append(str(exc))
                    limited = exc.status == 429 and exc.error != "daily_quota_exceeded"
                    if limited and retry < len(PROVIDER_DELAYS):
                        time.sleep(provider_delay(retry, exc.retry_after, s))
                        continue
                    billing |= exc.status == 402
                    break  # next provider
                if ctx.lease_lost or dq.get(ctx.job_id).state != "running":
                    return {"pack": pack, "dropped": "the job expired or was taken over"}
                tell_once(dq.get(ctx.job_id), "pack", pack=pack)
                return {"pack": pack, "provider": provider}
        if billing:
            dq.pause(QUEUE, "BILLING_EXHAUSTED: a provider answered 402", source="auto")
            dq.alert("billing_exhausted", "no provider could serve a request: top up the "
                     "AI account, then /resume", severity="critical", cooldown=ALERT_COOLDOWN)  # fmt: skip
            raise BillingExhausted("BILLING_EXHAUSTED: " + "; ".join(errors))
        raise GenerationError("no provider produced a pack: " + "; ".join(errors))

    @dq.task(
        queue=LEADS_QUEUE, max_attempts=5, backoff=durq.tiers([5 * s, 15 * s, 60 * s, 300 * s])
    )
    def publish_lead(name: str, contact: str) -> None:
        """Post a lead card to the leads group; the lead number is the job id."""
        send(LEADS_CHAT, f"Lead #{durq.context().job_id}: {name}, {contact}")

    return Bot(dq, generate, tell, publish_lead, s)
