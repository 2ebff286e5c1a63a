"""The delivery gateway on durq: one task, its retry policy, and the recovery summary.

Write-up 002 built a file-per-message queue, a recovery loop, tiered backoff, 14 permanent
error patterns and a cause-chain classifier by hand. Here durq stores every message before
``send`` returns, the worker retries on the write-up's tiers, the patterns are classify
rules, and the cause chain is walked by durq's built-in classifier.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any

import durq
from durq.classify import PERMANENT, TRANSIENT, rule

QUEUE = "outbound"
MAX_ATTEMPTS = 5  # "MAX_RETRIES = 5"
BACKOFF_TIERS = (5.0, 25.0, 120.0, 600.0)  # "BACKOFF_TIERS_MS = [5_000, 25_000, 120_000, 600_000]"

#: The write-up's classes of permanent delivery errors, matched in the chat API's description.
PERMANENT_PATTERNS = {
    "chat_not_found": r"chat not found",
    "user_not_found": r"user not found",
    "user_deactivated": r"user is deactivated",
    "bot_blocked": r"bot was blocked by the user",
    "bot_kicked": r"bot was kicked",
    "forbidden": r"^forbidden",
    "no_rights": r"not enough rights|have no rights to send",
    "write_forbidden": r"chat_write_forbidden",
    "message_too_long": r"message is too long",
    "message_empty": r"message text is empty",
    "bad_format": r"can't parse entities",
    "peer_invalid": r"peer_id_invalid",
    "chat_migrated": r"group chat was upgraded to a supergroup",
    "recipient_invalid": r"invalid (?:recipient|chat_id)",
}


class DeliveryError(Exception):
    """The chat API did not take a message: ``status`` (0 for no answer) and its description."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status


def _server_side(exc: BaseException) -> str | None:
    """5xx and 429 answers are worth retrying; anything else unmatched is left unclassified."""
    if isinstance(exc, DeliveryError) and (exc.status >= 500 or exc.status == 429):
        return TRANSIENT
    return None


RULES = [
    rule(PERMANENT, types=DeliveryError, pattern=p, reason=n) for n, p in PERMANENT_PATTERNS.items()
]

_settings: dict[str, Any] = {"chat_url": "http://127.0.0.1:9", "timeout": 10.0}


def configure(chat_url: str, timeout: float = 10.0) -> None:
    """Point the task at the chat API (a process-wide setting, not part of any payload)."""
    _settings.update(chat_url=chat_url.rstrip("/"), timeout=timeout)


def create_app(url: str, time_scale: float = 1.0) -> tuple[durq.Durq, durq.Task[Any, Any]]:
    """The durq app and its ``deliver`` task; ``time_scale`` shrinks the backoff tiers (tests)."""
    dq = durq.Durq(url)

    @dq.task(
        queue=QUEUE,
        max_attempts=MAX_ATTEMPTS,
        backoff=durq.tiers([t * time_scale for t in BACKOFF_TIERS]),
        classify=[*RULES, _server_side],
    )
    def deliver(
        channel: str, to: str, payloads: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        """Send each payload of one queued delivery; the message ids the chat API returned."""
        ids = [_send(to, p) for p in payloads]
        return {"channel": channel, "to": to, "message_ids": ids}

    return dq, deliver


def _send(chat_id: str, payload: dict[str, Any]) -> int:
    body = json.dumps({"chat_id": chat_id, "text": payload.get("text", "")}).encode()
    request = urllib.request.Request(
        f"{_settings['chat_url']}/sendMessage",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=_settings["timeout"]) as response:
            return int(json.loads(response.read())["result"]["message_id"])
    except urllib.error.HTTPError as exc:
        try:
            description = str(json.loads(exc.read()).get("description", exc.reason))
        except ValueError:
            description = str(exc.reason)
        raise DeliveryError(exc.code, description) from None
    except OSError as exc:  # reset, refused, timed out: durq finds it in the cause chain
        raise DeliveryError(0, f"no answer from the chat API for {chat_id}") from exc


@dataclass
class RecoverySummary:
    """The write-up's summary, read from the database for the window (since, until].

    ``recovered``: deliveries that succeeded; ``failed``: moved to the failed set by a
    permanent error; ``skipped_max_retries``: failed because all 5 attempts were spent;
    ``deferred_backoff``: messages waiting out a backoff now.
    """

    recovered: int
    failed: int
    skipped_max_retries: int
    deferred_backoff: int
    since: float
    until: float


def summarize(dq: durq.Durq, since: float, until: float | None = None) -> RecoverySummary:
    """Count what happened to the gateway's messages between ``since`` and ``until`` (epoch s)."""
    until = time.time() if until is None else until

    def finished(state: str) -> list[durq.Job]:
        return [
            j
            for j in dq.jobs(state=state, queue=QUEUE, limit=10_000)
            if j.finished_at is not None and since < j.finished_at <= until
        ]

    failed = finished("failed")
    permanent = [j for j in failed if j.last_error and j.last_error.kind.startswith("permanent")]
    waiting = [j for j in dq.jobs(state="scheduled", queue=QUEUE, limit=10_000) if j.attempts]
    return RecoverySummary(
        recovered=len(finished("succeeded")),
        failed=len(permanent),
        skipped_max_retries=len(failed) - len(permanent),
        deferred_backoff=len(waiting),
        since=since,
        until=until,
    )


def queue_status(dq: durq.Durq, last: RecoverySummary | None) -> dict[str, Any]:
    """What ``GET /api/queue/status`` answers: depth, messages in backoff, the last summary."""
    queue = dq.status()["queues"].get(QUEUE, {})
    counts = queue.get("counts", {})
    return {
        "depth": sum(counts.get(s, 0) for s in ("queued", "scheduled", "running")),
        "in_backoff": queue.get("in_backoff", 0),
        "delivered": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0),
        "last_summary": asdict(last) if last else None,
    }
