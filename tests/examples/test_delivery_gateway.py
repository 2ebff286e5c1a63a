"""The delivery gateway (write-up 002) end to end: real gateway processes, a real SQLite file,
real signals, and a fake chat service on loopback that records every request.

Each test names the part of the write-up it checks. Backoff tiers run at 1/100 of their
real length (``--time-scale 0.01``: 5 s → 50 ms, 25 s → 250 ms, 120 s → 1.2 s).
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from examples.delivery_gateway import chat_api
from examples.delivery_gateway.gateway import BACKOFF_TIERS, MAX_ATTEMPTS, PERMANENT_PATTERNS

from tests.support.procs import ROOT, wait_for

SCALE = 0.01


class Gateway:
    """``python -m examples.delivery_gateway serve`` as a child process."""

    def __init__(self, data: Path, chat_url: str, lease: float = 30.0) -> None:
        self.out = data / f"gateway-{time.monotonic_ns()}.out"
        self._out = open(self.out, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "examples.delivery_gateway", "--data-dir", str(data),
             "serve", "--chat-url", chat_url, "--port", "0", "--cycle", "0.5",
             "--lease", str(lease), "--time-scale", str(SCALE)],
            cwd=ROOT, stdout=self._out, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.out.read_text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def port(self) -> int:
        wait_for(lambda: any(e["event"] == "api_listening" for e in self.lines()), 20)
        return next(e["port"] for e in self.lines() if e["event"] == "api_listening")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._out.close()


def cli(data: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "examples.delivery_gateway", "--data-dir", str(data), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def chat() -> Iterator[tuple[chat_api.ChatService, str]]:
    server, _ = chat_api.serve()
    try:
        yield server.chat, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[Gateway]]:
    started: list[Gateway] = []
    yield started
    for g in started:
        g.stop()


def requests_to(chat: chat_api.ChatService, chat_id: str) -> list[dict[str, Any]]:
    with chat.lock:
        return [r for r in chat.log if r["chat_id"] == chat_id]


def final_states(data: Path) -> dict[str, tuple[str, int]]:
    """chat id -> (state, attempts), read with the durq API from another process's file."""
    import durq

    dq = durq.Durq(f"sqlite:///{data / 'durq.db'}", migrate=False)
    try:
        return {j.payload["to"]: (j.state, j.attempts) for j in dq.jobs(limit=1000)}
    finally:
        dq.close()


def test_messages_are_stored_before_sending_and_sent_once_the_gateway_runs(
    tmp_path: Path, chat: tuple[chat_api.ChatService, str], gateways: list[Gateway]
) -> None:
    """'Queue Storage — Atomic Enqueue': a message is on disk before anything is sent."""
    service, url = chat
    for name in ("ok-ann", "ok-bob", "ok-cid"):
        assert cli(tmp_path, "send", "--to", name, f"hi {name}")["event"] == "stored"
    status = cli(tmp_path, "status")
    assert status["depth"] == 3 and service.log == []
    gateways.append(Gateway(tmp_path, url))
    wait_for(lambda: final_states(tmp_path).get("ok-cid", ("", 0))[0] == "succeeded" and
             all(s == "succeeded" for s, _ in final_states(tmp_path).values()), 30)  # fmt: skip
    assert sorted(r["chat_id"] for r in service.log) == ["ok-ann", "ok-bob", "ok-cid"]


def test_a_gateway_killed_mid_delivery_delivers_after_restart(
    tmp_path: Path, chat: tuple[chat_api.ChatService, str], gateways: list[Gateway]
) -> None:
    """'Overview': no message is lost even if the gateway crashes mid-delivery (SIGKILL)."""
    service, url = chat
    cli(tmp_path, "send", "--to", "slow-dee", "hello")
    first = Gateway(tmp_path, url, lease=2.0)
    gateways.append(first)
    wait_for(lambda: len(requests_to(service, "slow-dee")) == 1, 30)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    assert final_states(tmp_path)["slow-dee"][0] == "running"
    gateways.append(Gateway(tmp_path, url, lease=2.0))
    wait_for(lambda: final_states(tmp_path)["slow-dee"][0] == "succeeded", 60)
    # At least once: the request in flight when the process died is sent again.
    assert len(requests_to(service, "slow-dee")) == 2


def test_transient_failures_wait_out_the_backoff_tiers_then_deliver(
    tmp_path: Path, chat: tuple[chat_api.ChatService, str], gateways: list[Gateway]
) -> None:
    """'Backoff Tiers' 5 s, 25 s, 120 s, and 'Error Classification': a dropped connection
    deep in the cause chain is transient."""
    service, url = chat
    cli(tmp_path, "send", "--to", "flaky3-fox", "hello")
    cli(tmp_path, "send", "--to", "reset2-gil", "hello")
    gateways.append(Gateway(tmp_path, url))
    wait_for(lambda: [s for s, _ in final_states(tmp_path).values()] == ["succeeded"] * 2, 60)
    times = [r["at"] for r in requests_to(service, "flaky3-fox")]
    assert len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for gap, tier in zip(gaps, BACKOFF_TIERS, strict=False):
        assert gap >= tier * SCALE * 0.95, (gaps, tier)
    assert len(requests_to(service, "reset2-gil")) == 3
    assert final_states(tmp_path) == {
        "flaky3-fox": ("succeeded", 4),
        "reset2-gil": ("succeeded", 3),
    }


def test_permanent_errors_fail_at_once_and_max_attempts_stops_the_rest(
    tmp_path: Path, chat: tuple[chat_api.ChatService, str], gateways: list[Gateway]
) -> None:
    """'Permanent Error Detection' (moved to the failed set, no retry), 'MAX_RETRIES = 5',
    and the 'Recovery Summary' fields."""
    service, url = chat
    for name in ("blocked-eve", "gone-fay", "deactivated-ian", "down-gus", "ok-hal"):
        cli(tmp_path, "send", "--to", name, "hello")
    cli(tmp_path, "send", "--to", "ok-jo", "x" * 5000)  # over the chat's 4,096 characters
    gateway = Gateway(tmp_path, url)
    gateways.append(gateway)
    wait_for(
        lambda: all(s in ("succeeded", "failed") for s, _ in final_states(tmp_path).values()), 60
    )
    states = final_states(tmp_path)
    for name in ("blocked-eve", "gone-fay", "deactivated-ian", "ok-jo"):
        assert states[name] == ("failed", 1), name
        assert len(requests_to(service, name)) == 1
    assert states["down-gus"] == ("failed", MAX_ATTEMPTS)
    assert len(requests_to(service, "down-gus")) == MAX_ATTEMPTS
    assert states["ok-hal"] == ("succeeded", 1)
    wait_for(lambda: any(e["event"] == "recovery_summary" for e in gateway.lines()), 10)
    totals = {"recovered": 0, "failed": 0, "skipped_max_retries": 0}
    time.sleep(1.2)  # two more cycles, so every finish is inside a reported window
    for event in gateway.lines():
        if event["event"] == "recovery_summary":
            for field in totals:
                totals[field] += event[field]
    assert totals == {"recovered": 1, "failed": 4, "skipped_max_retries": 1}
    # The same figures over HTTP, with the queue depth.
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway.port()}/api/queue/status") as r:
        status = json.loads(r.read())
    assert status["depth"] == 0 and status["failed"] == 5 and status["delivered"] == 1
    assert set(status["last_summary"]) >= {
        "recovered",
        "failed",
        "skipped_max_retries",
        "deferred_backoff",
    }


def test_failed_messages_are_retried_by_hand_from_the_cli(
    tmp_path: Path, chat: tuple[chat_api.ChatService, str], gateways: list[Gateway]
) -> None:
    """'Manual Retry': failed items go back to the queue with a fresh attempt budget."""
    service, url = chat
    cli(tmp_path, "send", "--to", "down-kim", "hello")
    gateways.append(Gateway(tmp_path, url))
    wait_for(lambda: final_states(tmp_path)["down-kim"][0] == "failed", 60)
    with service.lock:
        service.healed.add("down-kim")
    retried = cli(tmp_path, "retry")
    assert retried["event"] == "retried" and len(retried["ids"]) == 1
    wait_for(lambda: final_states(tmp_path)["down-kim"][0] == "succeeded", 30)
    assert len(requests_to(service, "down-kim")) == MAX_ATTEMPTS + 1
    assert cli(tmp_path, "retry", "999")["refused"][0]["id"] == 999


def test_every_pattern_of_the_write_up_is_permanent() -> None:
    """'Permanent Error Detection': 14 patterns, each one judged permanent by durq."""
    from examples.delivery_gateway.gateway import RULES, DeliveryError

    from durq.classify import classify

    samples = {
        "chat_not_found": "Bad Request: chat not found",
        "user_not_found": "Bad Request: user not found",
        "user_deactivated": "Forbidden: user is deactivated",
        "bot_blocked": "Forbidden: bot was blocked by the user",
        "bot_kicked": "Forbidden: bot was kicked from the group chat",
        "forbidden": "Forbidden",
        "no_rights": "Bad Request: not enough rights to send text messages",
        "write_forbidden": "Bad Request: CHAT_WRITE_FORBIDDEN",
        "message_too_long": "Bad Request: message is too long",
        "message_empty": "Bad Request: message text is empty",
        "bad_format": "Bad Request: can't parse entities",
        "peer_invalid": "Bad Request: PEER_ID_INVALID",
        "chat_migrated": "Bad Request: group chat was upgraded to a supergroup chat",
        "recipient_invalid": "Bad Request: invalid chat_id",
    }
    assert set(samples) == set(PERMANENT_PATTERNS)
    for reason, text in samples.items():
        verdict = classify(DeliveryError(400, text), RULES)
        assert (verdict.kind, verdict.reason) == ("permanent", f"rule:{reason}"), text
    assert classify(DeliveryError(400, "Bad Request: something new"), RULES).kind == "transient"
